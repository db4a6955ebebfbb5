"""The table has one definition; the pynamodb models must agree with it."""

from __future__ import annotations

from runplane.store import models
from runplane.store.table import (
    GLOBAL_INDEXES,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    create_table_request,
)


def test_every_model_uses_the_tables_keys_and_ttl() -> None:
    for model in models._all_models():
        attributes = model.get_attributes()
        assert attributes["pk"].attr_name == PARTITION_KEY
        assert attributes["sk"].attr_name == SORT_KEY
        assert attributes["expires_at"].attr_name == TTL_ATTRIBUTE


def test_model_indexes_exist_in_the_definition_with_the_same_keys() -> None:
    defined = {(i.name, i.partition_key, i.sort_key) for i in GLOBAL_INDEXES}
    used = set()
    for model in models._all_models():
        for index in model._indexes.values():
            schema = index._get_schema()
            keys = {k["KeyType"]: k["AttributeName"] for k in schema["key_schema"]}
            used.add((index.Meta.index_name, keys["HASH"], keys["RANGE"]))
    assert used
    assert used <= defined


def test_the_create_request_declares_only_key_attributes() -> None:
    request = create_table_request("t")
    declared = {a["AttributeName"] for a in request["AttributeDefinitions"]}
    assert declared == {PARTITION_KEY, SORT_KEY} | {
        attr for i in GLOBAL_INDEXES for attr in (i.partition_key, i.sort_key)
    }
    assert request["BillingMode"] == "PAY_PER_REQUEST"
