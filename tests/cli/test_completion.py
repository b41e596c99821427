"""The shell's Tab completion in context (`iceduck.completion`), on a real lake's catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import iceduck
from iceduck.completion import CatalogNames, catalog_names, complete
from iceduck.lake import Lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    lk = iceduck.connect(tmp_path_factory.mktemp("completion") / "wh")
    lk.sql("CREATE SCHEMA shop")
    lk.sql("CREATE TABLE shop.orders (id BIGINT, ordered_at TIMESTAMP, note VARCHAR)")
    lk.sql("CREATE TABLE shop.owners (id BIGINT, name VARCHAR)")
    lk.sql("CREATE SCHEMA sales")
    lk.con.execute("CREATE TABLE memory.main.orbit (x INT)")  # a DuckDB table beside the lake
    yield lk
    lk.close()


@pytest.fixture(scope="module")
def names(lake: Lake) -> CatalogNames:
    return catalog_names(lake.con)


def test_namespaces_of_the_lake_after_its_name(names: CatalogNames) -> None:
    assert complete("SELECT * FROM lake.s", names) == ("s", ["sales", "shop"])


def test_tables_of_a_namespace_fully_qualified_or_not(names: CatalogNames) -> None:
    assert complete("SELECT * FROM lake.shop.o", names) == ("o", ["orders", "owners"])
    assert complete("SELECT * FROM shop.or", names) == ("or", ["orders"])
    assert complete("INSERT INTO lake.shop.", names) == ("", ["orders", "owners"])


def test_columns_after_a_relation(names: CatalogNames) -> None:
    assert complete("SELECT lake.shop.orders.", names) == ("", ["id", "note", "ordered_at"])
    assert complete("SELECT orders.o", names) == ("o", ["ordered_at"])


def test_after_from_only_relations_schemas_and_databases(names: CatalogNames) -> None:
    word, found = complete("SELECT 1 FROM or", names)
    assert word == "or" and found == ["orbit", "orders"]  # no OR / ORDER keywords, no functions
    word, found = complete("SELECT * FROM l", names)
    assert "lake" in found and not [f for f in found if f.startswith("__")]


def test_elsewhere_keywords_functions_and_columns(names: CatalogNames) -> None:
    word, found = complete("SELECT ordered", names)
    assert (word, found) == ("ordered", ["ordered_at"])
    word, found = complete("SELECT count(*) FROM shop.orders ORD", names)
    assert "ORDER" in found and "ordered_at" in found


def test_internal_objects_are_never_offered(names: CatalogNames) -> None:
    assert complete("SELECT * FROM __ice", names) == ("__ice", [])
    assert not [r for r in names.relations if r[2].startswith("__iceduck")]


def test_the_shell_completer_uses_the_rules(lake: Lake, tmp_path: Path) -> None:
    pytest.importorskip("prompt_toolkit")
    import io

    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from iceduck.shell import Shell, _completer

    completer = _completer(Shell(lake, io.StringIO(), io.StringIO()))
    got = list(completer.get_completions(Document("SELECT * FROM lake.shop.ow"), CompleteEvent()))
    assert [(c.text, c.start_position) for c in got] == [("owners", -2)]
    got = list(completer.get_completions(Document(".desc"), CompleteEvent()))
    assert [c.text for c in got] == [".describe"]
