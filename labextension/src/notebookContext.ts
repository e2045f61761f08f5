/**
 * The chat knows the open notebook: a message to DeerFlow that has no notebook attached gets
 * the notebook the user last had in focus, as a jupyterlab-chat notebook attachment.
 *
 * The attachment is added just before the message is sent (a chat command provider's
 * `onSubmit`, which jupyterlab-chat calls for every message), so it is the same seam as a
 * notebook the user attaches by hand: the sent message shows it, the server turns it into the
 * run option `notebook_context` (`deerflow_jupyter/chat/notebook_context.py`), reads it through
 * its ContentsManager (the server's root and rules; only what this user's server can open), gives
 * it to the agent as fenced, untrusted context, and the run says "context: N cells of X.ipynb".
 * A notebook with unsaved changes is saved first, since the server reads the file.  A notebook
 * the user attached (the whole notebook or some cells) is kept as it is, and a message that
 * reaches another persona as well gets nothing added.
 */
import { ChatCommand, IChatCommandProvider, IChatCommandRegistry, IInputModel } from '@jupyter/chat';
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { Contents } from '@jupyterlab/services';

import { addressesDeerFlow } from './chatInput';

const NOTEBOOK_MIMETYPE = 'application/x-ipynb+json';
/** Drives whose paths are the server's own files: the default one, and jupyter-collaboration's. */
const SERVER_DRIVES = new Set(['', 'RTC']);

export class OpenNotebookContext implements IChatCommandProvider {
  readonly id = 'deerflow-jupyterlab:open-notebook-context';

  constructor(
    private readonly _notebooks: INotebookTracker,
    private readonly _contents: Contents.IManager
  ) {}

  async listCommandCompletions(): Promise<ChatCommand[]> {
    return []; // it completes nothing: it only acts when a message is sent
  }

  async onSubmit(input: IInputModel): Promise<void> {
    if (!input.addAttachment || !addressesDeerFlow(input)) {
      return;
    }
    if (input.attachments.some(attachment => attachment.type === 'notebook')) {
      return; // the user chose the context
    }
    const panel = this._notebooks.currentWidget;
    if (!panel || panel.isDisposed || !SERVER_DRIVES.has(this._contents.driveName(panel.context.path))) {
      return; // none open, or one on another drive (the server would read a different file)
    }
    if (panel.context.model.dirty) {
      // the server reads the file: what the user sees is what it gets (as autosave would do soon anyway);
      // when saving fails (a read-only file), the saved version is the context
      await panel.context.save().catch(reason => console.warn('DeerFlow: could not save the notebook', reason));
    }
    // localPath: the path in the server's root, without the drive prefix ("RTC:" under collaboration)
    input.addAttachment({ type: 'notebook', value: panel.context.localPath, mimetype: NOTEBOOK_MIMETYPE });
  }
}

export const notebookContextPlugin: JupyterFrontEndPlugin<void> = {
  id: 'deerflow-jupyterlab:notebook-context',
  description: 'A chat message to DeerFlow without a notebook attachment carries the notebook in focus.',
  autoStart: true,
  requires: [IChatCommandRegistry, INotebookTracker],
  activate: (app: JupyterFrontEnd, registry: IChatCommandRegistry, notebooks: INotebookTracker) => {
    registry.addProvider(new OpenNotebookContext(notebooks, app.serviceManager.contents));
  }
};
