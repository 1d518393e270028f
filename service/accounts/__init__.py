"""Accounts: users, their API tokens and roles (authentication and authorisation), and who may see what."""
