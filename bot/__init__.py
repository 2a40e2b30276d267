"""genbot: the Generation Service API in Discord servers."""
