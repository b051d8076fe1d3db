-- The demo fleet's databases, one per service (consumer/fleet.py): created by the
-- postgres image on its first start, as `cdc-ctl stack up` creates them natively
-- (StackConfig.service_databases). The migrate service then prepares them.
CREATE DATABASE orders;
CREATE DATABASE inventory;
CREATE DATABASE marketing;
CREATE DATABASE points;
CREATE DATABASE notifications;
CREATE DATABASE search;
