/**
 * Two Launcher cards in a "DeerFlow" section: a new chat with DeerFlow, and the research
 * quickstart notebook.
 *
 * The chat card runs jupyterlab-chat's own `createAndOpen` command.  DeerFlow answers a new
 * chat when it is the persona picked in the chat's input: the server makes it the default
 * pick (`DeerFlowExtension.default_persona`); when someone configured another default, the
 * card starts the input with `@DeerFlow `, which reaches DeerFlow whatever is picked.
 *
 * The notebook card POSTs to the server's quickstart route (the route copies the template into
 * the Jupyter root, following no link and keeping a copy the user already has; a GET changes
 * nothing) and opens the path it answers.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { showErrorMessage } from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ILauncher } from '@jupyterlab/launcher';
import { ServerConnection } from '@jupyterlab/services';

import { deerflowIcon, PERSONA_ID, PERSONA_NAME, QUICKSTART_ROUTE } from './constants';

export const CommandIDs = {
  newChat: 'deerflow:new-chat',
  quickstart: 'deerflow:open-quickstart'
};

const CATEGORY = 'DeerFlow';
const CHAT_CREATE_AND_OPEN = 'jupyterlab-chat:createAndOpen';

/** The input model of a chat widget, if the widget is one (checked, not assumed). */
function chatInput(widget: unknown): { value: string } | null {
  const input = (widget as { content?: { model?: { input?: { value?: unknown } } } } | null)?.content
    ?.model?.input;
  return input && typeof input.value === 'string' ? (input as { value: string }) : null;
}

/** The notebook the quickstart route copied (or kept), relative to the Jupyter root. */
export async function quickstartPath(settings = ServerConnection.makeSettings()): Promise<string> {
  const url = URLExt.join(settings.baseUrl, QUICKSTART_ROUTE);
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'POST', headers: { Accept: 'application/json' } },
    settings
  );
  if (!response.ok) {
    throw new ServerConnection.ResponseError(response, await response.text());
  }
  const body = (await response.json()) as { path?: unknown };
  if (typeof body.path !== 'string' || !body.path) {
    throw new Error(`the quickstart route answered no notebook path: ${JSON.stringify(body)}`);
  }
  return body.path;
}

export const launcherPlugin: JupyterFrontEndPlugin<void> = {
  id: 'deerflow-jupyterlab:launcher',
  description: 'Launcher cards: a DeerFlow chat and the DeerFlow quickstart notebook.',
  autoStart: true,
  requires: [ILauncher],
  activate: (app: JupyterFrontEnd, launcher: ILauncher) => {
    app.commands.addCommand(CommandIDs.newChat, {
      label: 'DeerFlow chat',
      caption: 'A new chat with the DeerFlow agent',
      icon: deerflowIcon,
      isEnabled: () => app.commands.hasCommand(CHAT_CREATE_AND_OPEN),
      execute: async () => {
        const widget = await app.commands.execute(CHAT_CREATE_AND_OPEN, {});
        const input = chatInput(widget);
        if (input && PageConfig.getOption('jupyter_ai_default_persona') !== PERSONA_ID && !input.value) {
          input.value = `@${PERSONA_NAME} `;
        }
        return widget;
      }
    });
    app.commands.addCommand(CommandIDs.quickstart, {
      label: 'DeerFlow notebook',
      caption: 'The research quickstart, copied into deerflow-quickstart/ (your copy is kept)',
      icon: deerflowIcon,
      execute: async () => {
        try {
          return await app.commands.execute('docmanager:open', { path: await quickstartPath() });
        } catch (error) {
          await showErrorMessage('Could not open the DeerFlow quickstart', String(error));
          return null;
        }
      }
    });
    launcher.add({ command: CommandIDs.newChat, category: CATEGORY, rank: 1 });
    launcher.add({ command: CommandIDs.quickstart, category: CATEGORY, rank: 2 });
  }
};
