/**
 * DeerFlow Notebook's JupyterLab extension: the browser side of what the server extension
 * (`deerflow_jupyter`) cannot do alone.  Each plugin is small and in its own module.
 */
import { JupyterFrontEndPlugin } from '@jupyterlab/application';

import { launcherPlugin } from './launcher';
import { magicCellsPlugin } from './magicCells';
import { mentionPlugin } from './mention';
import { notebookContextPlugin } from './notebookContext';

const plugins: JupyterFrontEndPlugin<void>[] = [launcherPlugin, notebookContextPlugin, magicCellsPlugin, mentionPlugin];

export default plugins;
