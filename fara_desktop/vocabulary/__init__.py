"""The words every layer uses: the base error, a chat's messages, sampling, tool specs and calls, a reply's
statistics, a cited passage."""
