"""Reads for the pages: each selector answers one question for a view, in as few statements as it can."""
