"""Webhooks: subscriptions to workflow events and their outbox (subscriptions), and its delivery (delivery)."""
