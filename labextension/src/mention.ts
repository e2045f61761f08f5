/**
 * `@De` completes to `@DeerFlow` in the chat input.
 *
 * jupyterlab-chat's own mention provider lists the chat's users but skips bot users, and a
 * persona is one.  This provider, added to the same registry (`IChatCommandRegistry`, the
 * chat's completion extension point), offers DeerFlow's user; on send, a message that names
 * `@DeerFlow` records it as a mention, as the chat does for people.
 */
import { ChatCommand, IChatCommandProvider, IChatCommandRegistry, IInputModel, IUser } from '@jupyter/chat';
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';

import { deerflowUser, mentionsDeerFlow } from './chatInput';
import { deerflowAvatarIcon, PERSONA_NAME } from './constants';

/** The word being typed is a mention: `@` and what follows. */
const TYPED_MENTION = /^@([\w-]*)$/;

/** The name written after `@` (jupyterlab-chat's rule: display name, spaces as dashes). */
function mentionName(user: IUser): string {
  return user.mention_name || (user.display_name || user.name || user.username).replace(/ /g, '-');
}

export class PersonaMentions implements IChatCommandProvider {
  readonly id = 'deerflow-jupyterlab:persona-mentions';

  async listCommandCompletions(input: IInputModel): Promise<ChatCommand[]> {
    const typed = TYPED_MENTION.exec(input.currentWord ?? '')?.[1];
    const persona = deerflowUser(input);
    if (typed === undefined || !persona) {
      return [];
    }
    const name = mentionName(persona);
    if (!name.toLowerCase().startsWith(typed.toLowerCase()) || mentionsDeerFlow(input.value)) {
      return []; // another name, or DeerFlow is named already
    }
    return [
      {
        name: `@${name}`,
        providerId: this.id,
        icon: deerflowAvatarIcon,
        description: `Ask ${PERSONA_NAME}`,
        spaceOnAccept: true
      }
    ];
  }

  async onSubmit(input: IInputModel): Promise<void> {
    const persona = deerflowUser(input);
    if (persona && mentionsDeerFlow(input.value)) {
      input.addMention?.(persona);
    }
  }
}

export const mentionPlugin: JupyterFrontEndPlugin<void> = {
  id: 'deerflow-jupyterlab:mentions',
  description: 'Completes @DeerFlow in the chat input.',
  autoStart: true,
  requires: [IChatCommandRegistry],
  activate: (_app: JupyterFrontEnd, registry: IChatCommandRegistry) => {
    registry.addProvider(new PersonaMentions());
  }
};
