"""The refund-desk demo: a customer-service agent whose tools act on a small HTTP "world".

`world` is that service (it records every effect by idempotency key, so a run can prove that
no effect happened twice); `world_client` is what the demo's tools call it with.
"""
