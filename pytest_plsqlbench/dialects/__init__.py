"""Database dialects behind one interface (:mod:`.base`): PostgreSQL and Oracle."""
