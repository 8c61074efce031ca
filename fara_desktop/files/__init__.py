"""Files and folders: the app's per-user folders, private atomic writes, files from outside opened without
hanging, the app's own assets."""
