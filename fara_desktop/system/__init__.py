"""The process and the computer: logging, the child process that reads files from outside within a budget, the
keychain."""
