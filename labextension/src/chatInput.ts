/**
 * What the chat input is about to send, as DeerFlow sees it.
 */
import { IInputModel, IUser } from '@jupyter/chat';

import { PERSONA_ID, PERSONA_NAME } from './constants';

/** `@DeerFlow` as a word of a message (persona.py matches the same). */
const MENTION = new RegExp(`(?<![\\w-])@${PERSONA_NAME}\\b`);

/** The persona picked in the input (the persona manager's `to_persona`), or null for "No one". */
export function pickedPersona(input: IInputModel): string | null {
  const picked = input.getMetadata?.()['to_persona'];
  return typeof picked === 'string' && picked ? picked : null;
}

/**
 * Whether DeerFlow alone is addressed: picked in the input, or mentioned while no persona is picked.
 *
 * A message that another persona receives too (picked, with `@DeerFlow` in it) does not count:
 * what DeerFlow's context adds to a message would go to that persona as well.
 */
export function addressesDeerFlow(input: IInputModel): boolean {
  const picked = pickedPersona(input);
  return picked === null ? MENTION.test(input.value) : picked === PERSONA_ID;
}

/** DeerFlow's user in this chat (the persona manager adds it when the chat opens), if there. */
export function deerflowUser(input: IInputModel): IUser | null {
  return input.chatContext?.users.find(user => user.username === PERSONA_ID) ?? null;
}

/** Whether the message mentions DeerFlow by name. */
export function mentionsDeerFlow(text: string): boolean {
  return MENTION.test(text);
}
