/**
 * A `%%deerflow` cell's body is a prompt, not Python: its editor highlights it as markdown.
 *
 * JupyterLab gives every code cell the kernel's language (the notebook's `codeMimetype`, set
 * again whenever the kernel's language info arrives or changes), so setting a cell's mime type
 * once would not last.  Each code cell is watched instead: when its source starts with
 * `%%deerflow` its mime type becomes markdown's, and whenever anything sets it back, it is
 * corrected once that change has been delivered.  "Delivered" includes the editor's own
 * reaction, which loads the language for the mime type it was given asynchronously: the
 * correction waits until both languages are loaded, so the editor's load of the kernel's
 * language cannot finish after ours and win.  A cell that stops being `%%deerflow` gets the
 * notebook's code mime type again.  Mime types are not saved in the notebook file.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICellModel } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, Notebook, NotebookPanel } from '@jupyterlab/notebook';

/** A cell magic line: IPython allows blank lines and indentation before it. */
const DEERFLOW_CELL = /^\s*%%deerflow(?:\s|$)/;

/** Markdown as in markdown cells (GitHub-flavoured, with math). */
export const PROMPT_MIMETYPE = 'text/x-ipythongfm';

export function isDeerFlowCell(source: string): boolean {
  return DEERFLOW_CELL.test(source);
}

/** Until the languages of both mime types are loaded (a failed load is the editor's to report). */
async function languagesLoaded(languages: IEditorLanguageRegistry, mimetypes: string[]): Promise<void> {
  await Promise.all(mimetypes.map(mimetype => languages.getLanguage(mimetype).catch(() => null)));
}

/** Cells already watched (a cell moved, or its deletion undone, is added again). */
const watched = new WeakSet<ICellModel>();

function watchCell(cell: ICellModel, notebook: Notebook, languages: IEditorLanguageRegistry): void {
  if (cell.type !== 'code' || watched.has(cell)) {
    return;
  }
  watched.add(cell);
  const correct = async () => {
    await languagesLoaded(languages, [cell.mimeType, PROMPT_MIMETYPE]);
    if (cell.isDisposed) {
      return;
    }
    if (isDeerFlowCell(cell.sharedModel.getSource())) {
      if (cell.mimeType !== PROMPT_MIMETYPE) {
        cell.mimeType = PROMPT_MIMETYPE;
      }
    } else if (cell.mimeType === PROMPT_MIMETYPE) {
      cell.mimeType = notebook.codeMimetype; // no longer a DeerFlow cell
    }
  };
  const later = () => void correct();
  cell.sharedModel.changed.connect(later);
  cell.mimeTypeChanged.connect(later);
  later();
}

function watchNotebook(panel: NotebookPanel, languages: IEditorLanguageRegistry): void {
  const notebook = panel.content;
  const model = panel.model;
  if (!model) {
    return;
  }
  for (const cell of model.cells) {
    watchCell(cell, notebook, languages);
  }
  model.cells.changed.connect((_cells, change) => {
    if (change.type === 'add' || change.type === 'set') {
      change.newValues.forEach(cell => watchCell(cell, notebook, languages));
    }
  });
}

export const magicCellsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'deerflow-jupyterlab:magic-cells',
  description: 'Highlights a %%deerflow cell as a markdown prompt, not as Python.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker, languages: IEditorLanguageRegistry) => {
    notebooks.forEach(panel => watchNotebook(panel, languages));
    notebooks.widgetAdded.connect((_tracker, panel) => watchNotebook(panel, languages));
  }
};
