"""JSON Schemas of the API's own request and response bodies (components), with those of addenda, comparisons,
exports, searches and webhooks in modules of their own."""
