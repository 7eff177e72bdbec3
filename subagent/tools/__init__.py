"""Built-in tools: reading, searching and writing files confined to a workspace."""

from ._paths import WorkspaceError as WorkspaceError
from ._root import Workspace as Workspace
from ._workspace import WorkspaceTool as WorkspaceTool
from ._workspace import workspace_tools as workspace_tools
