/**
 * Names shared with the Python side. Each is defined there too; change both together.
 */
import { LabIcon } from '@jupyterlab/ui-components';

import deerflowSvg from '../style/deerflow.svg';

/** The persona's id (`deerflow_jupyter/app.py` PERSONA_ID): its chat user's `username`. */
export const PERSONA_ID = 'jupyter-ai-personas::deerflow_jupyter::DeerFlowPersona';

/** The persona's display name, as written after `@` (`deerflow_jupyter/chat/persona.py`). */
export const PERSONA_NAME = 'DeerFlow';

/** The quickstart route (`deerflow_jupyter/handlers/quickstart.py`), relative to the base URL. */
export const QUICKSTART_ROUTE = 'deerflow/api/quickstart';

/** The persona's avatar (a copy of `deerflow_jupyter/chat/deerflow.svg`), sized by where it is shown. */
export const deerflowIcon = new LabIcon({ name: 'deerflow:logo', svgstr: deerflowSvg });

/** The avatar at the chat's avatar size (24 px): the chat's completion menu shows an icon as it is. */
export const deerflowAvatarIcon = new LabIcon({
  name: 'deerflow:avatar',
  svgstr: deerflowSvg.replace(/ width="\d+" height="\d+"/, ' width="24" height="24"')
});
