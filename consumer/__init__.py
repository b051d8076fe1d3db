"""The order example (an online shop), built on cdcbox: an order service that writes orders and
their OrderCreated events in one transaction, and the downstream services that apply
them (inventory, marketing coupons, points, notifications, search index)."""
