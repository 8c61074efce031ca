"""Text: names and text from outside made safe to show, and one way to write sizes, rates and durations."""
