//! The embedded in-memory store: native algorithms (`limiter::algorithm`) over sharded maps.
