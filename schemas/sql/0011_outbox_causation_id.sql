-- The event whose handling appended this one (its event id, '' for none): a handler
-- that produces while it consumes carries it on, with the consumed trace id, so a chain
-- of services can be followed event by event. It travels as the `causation_id` header
-- from both relays. A constant default: no table rewrite on a large outbox.
ALTER TABLE {outbox}
    ADD COLUMN IF NOT EXISTS causation_id text NOT NULL DEFAULT '',
    ADD CONSTRAINT outbox_causation_id_fits_header
        CHECK (octet_length(causation_id) <= 512) NOT VALID;
ALTER TABLE {quarantine}
    ADD COLUMN IF NOT EXISTS causation_id text NOT NULL DEFAULT '';
