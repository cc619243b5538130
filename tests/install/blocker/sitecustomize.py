"""Loaded by every Python started with this folder on PYTHONPATH (the CLI and its children): makes the
modules in $TOOLKIT_TEST_BLOCK unimportable and the tools in $TOOLKIT_TEST_NO_TOOLS absent from PATH, as
on a machine where an extra was never installed."""

import os
import shutil
import sys

_blocked = set(filter(None, os.environ.get("TOOLKIT_TEST_BLOCK", "").split(",")))


class _Blocker:
    """A finder ahead of all others: `import name` (or name.sub) raises ModuleNotFoundError as if it were
    never installed. Not `sys.modules[name] = None`: libraries that probe sys.modules (scipy's array API
    check looks up torch there) would see a module that is None instead of an absent one."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in _blocked:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if _blocked:
    sys.meta_path.insert(0, _Blocker())

_absent = set(filter(None, os.environ.get("TOOLKIT_TEST_NO_TOOLS", "").split(",")))
if _absent:
    _which = shutil.which

    def _which_without(cmd, mode=os.F_OK | os.X_OK, path=None):
        return None if os.path.basename(str(cmd)) in _absent else _which(cmd, mode, path)

    shutil.which = _which_without
