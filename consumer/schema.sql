-- Business tables of the order example. Each service owns its own tables and writes only
-- those; the demo (scripts/demo) gives each service a database of its own, with these
-- tables and its own inbox (and outbox, for the services that produce).
CREATE TABLE IF NOT EXISTS orders (
    order_id    text PRIMARY KEY,
    customer_id text NOT NULL,
    total_cents bigint NOT NULL,
    status      text NOT NULL DEFAULT 'CREATED',
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- When the status last changed: CONFIRMED or CANCELLED once inventory answered.
    status_changed_at timestamptz
);
CREATE TABLE IF NOT EXISTS order_lines (
    order_id text NOT NULL REFERENCES orders,
    line_no  int  NOT NULL,
    sku      text NOT NULL,
    quantity int  NOT NULL,
    price_cents bigint NOT NULL,
    PRIMARY KEY (order_id, line_no)
);
CREATE TABLE IF NOT EXISTS stock (
    sku       text PRIMARY KEY,
    available bigint NOT NULL,
    reserved  bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS inventory_reservation (
    order_id text NOT NULL,
    sku      text NOT NULL,
    quantity int  NOT NULL,
    reserved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, sku)
);
CREATE TABLE IF NOT EXISTS coupon_redemption (
    order_id text PRIMARY KEY,
    coupon_code text NOT NULL,
    redeemed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS points_pending (
    order_id    text PRIMARY KEY,
    customer_id text NOT NULL,
    points      bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS notification_outgoing (
    order_id text NOT NULL,
    channel  text NOT NULL,
    body     text NOT NULL,
    PRIMARY KEY (order_id, channel)
);
CREATE TABLE IF NOT EXISTS order_search_index (
    order_id    text PRIMARY KEY,
    customer_id text NOT NULL,
    skus        text[] NOT NULL,
    total_cents bigint NOT NULL,
    version     bigint NOT NULL
);
