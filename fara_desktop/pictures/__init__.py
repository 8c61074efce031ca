"""Pictures for the chat (issue 44): a stranger's image file decoded with a budget, off the app's process."""
