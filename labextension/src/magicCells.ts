/**
 * A `%%deerflow` cell's body is a prompt, not Python: its editor highlights it as markdown.
 *
 * JupyterLab gives every code cell the kernel's language (the notebook's `codeMimetype`, set
 * again whenever the kernel's language info arrives or changes), so setting a cell's mime type
 * once would not last.  Each code cell is watched instead: when its source starts with
 * `%%deerflow` its mime type becomes markdown's, and whenever anything sets it back, it is
 * corrected once that change has been delivered (a microtask later, so every listener, the
 * editor included, sees the correction last).  A cell that stops being `%%deerflow` gets the
 * notebook's code mime type again.  Mime types are not saved in the notebook file.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, Notebook, NotebookPanel } from '@jupyterlab/notebook';

/** A cell magic line: IPython allows blank lines and indentation before it. */
const DEERFLOW_CELL = /^\s*%%deerflow(?:\s|$)/;

/** Markdown as in markdown cells (GitHub-flavoured, with math). */
export const PROMPT_MIMETYPE = 'text/x-ipythongfm';

export function isDeerFlowCell(source: string): boolean {
  return DEERFLOW_CELL.test(source);
}

function watchCell(cell: ICellModel, notebook: Notebook): void {
  if (cell.type !== 'code') {
    return;
  }
  const correct = () => {
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
  const later = () => void Promise.resolve().then(correct);
  cell.sharedModel.changed.connect(later);
  cell.mimeTypeChanged.connect(later);
  correct();
}

function watchNotebook(panel: NotebookPanel): void {
  const notebook = panel.content;
  const model = panel.model;
  if (!model) {
    return;
  }
  for (const cell of model.cells) {
    watchCell(cell, notebook);
  }
  model.cells.changed.connect((_cells, change) => {
    if (change.type === 'add' || change.type === 'set') {
      change.newValues.forEach(cell => watchCell(cell, notebook));
    }
  });
}

export const magicCellsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'deerflow-jupyterlab:magic-cells',
  description: 'Highlights a %%deerflow cell as a markdown prompt, not as Python.',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (_app: JupyterFrontEnd, notebooks: INotebookTracker) => {
    notebooks.forEach(watchNotebook);
    notebooks.widgetAdded.connect((_tracker, panel) => watchNotebook(panel));
  }
};
