/**
 * The part of `@jupyter/chat` (0.25) this extension uses, declared here.
 *
 * `@jupyter/chat` is provided at run time by jupyterlab-chat's own extension (a shared
 * singleton, so its tokens are the same objects); our bundle never contains it
 * (`sharedPackages` in package.json: `bundled: false`).  Its 0.25 release is not on the npm
 * registry this project builds from, so instead of compiling against the package we declare
 * the few members we call, as they are in jupyter-chat's
 * `packages/jupyter-chat/src/registers/chat-commands.ts` and `input-model.ts`.
 */
declare module '@jupyter/chat' {
  import { Token } from '@lumino/coreutils';

  /** A chat user; personas are users with `bot: true`. */
  export interface IUser {
    username: string;
    name?: string;
    display_name?: string;
    mention_name?: string;
    bot?: boolean;
  }

  /** A file or notebook (optionally some of its cells) attached to a message. */
  export interface IAttachment {
    type: 'file' | 'notebook';
    value: string;
    mimetype?: string;
    cells?: { id: string; input_type: string }[];
  }

  /** What an input knows about its chat. */
  export interface IChatContext {
    readonly id?: string;
    readonly users: IUser[];
  }

  /** The chat input's model: its text, attachments and metadata before a message is sent. */
  export interface IInputModel {
    value: string;
    readonly currentWord: string | null;
    readonly attachments: IAttachment[];
    readonly chatContext: IChatContext;
    addAttachment?(attachment: IAttachment): void;
    addMention?(user: IUser): void;
    getMetadata?(): Record<string, unknown>;
  }

  /** One entry of the input's completion menu. */
  export type ChatCommand = {
    name: string;
    providerId: string;
    icon?: unknown;
    description?: string;
    replaceWith?: string;
    spaceOnAccept?: boolean;
  };

  /** A source of completions, also called with the input just before a message is sent. */
  export interface IChatCommandProvider {
    id: string;
    listCommandCompletions(inputModel: IInputModel): Promise<ChatCommand[]>;
    onSubmit(inputModel: IInputModel): Promise<void>;
  }

  export interface IChatCommandRegistry {
    addProvider(provider: IChatCommandProvider): void;
  }

  export const IChatCommandRegistry: Token<IChatCommandRegistry>;
}
