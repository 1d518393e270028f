"""The suite's Redis on 127.0.0.1:6379: a database number of its own, reached or skipped, and each run's keys
(under a prefix of its own) deleted afterwards. CI starts the server (.ci/run)."""

from __future__ import annotations

import os

import pytest

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
# A database number the suite owns; keys carry a per-run prefix on top, so parallel runs do not meet.
REDIS_DB = int(os.environ.get("QUOTECHECK_TEST_REDIS_DB", "15"))


def reachable_redis_url() -> str:
    """Returns the URL of the suite's Redis database; skips the test when the server does not answer."""
    import redis

    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as error:
        pytest.skip(f"Redis on {REDIS_HOST}:{REDIS_PORT} is unreachable: {error}. CI starts it (.ci/run).")
    finally:
        client.close()
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"


def delete_keys(url: str, prefix: str) -> None:
    """Deletes every key under ``prefix`` in the Redis database at ``url``."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
