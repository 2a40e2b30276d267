"""Business logic over the API client and the store; no Discord imports here."""
