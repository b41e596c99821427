"""A statement's table references, read from DuckDB's parse tree and resolved by DuckDB's rules.

`References` (one per DuckDB session state: `Router._settle` makes a new one when DuckDB's catalog
version moved) answers, for the tree of a query (`sql.parse_tree`):

* what each name in a FROM clause binds to, as DuckDB's binder will bind it: a CTE in scope
  shadows every one-part name; `x` and `a.x` are looked up on the session's search path (`USE`,
  `SET search_path`, temp.main first: `sql.names`); `db.s.x` is itself. Quoted names are single
  parts (`s."a.c"`);
* which of them are the lake's tables (the `lake.<ns>.<t>` views, also when named `t` after
  `USE lake.ns`) and which are `iceberg_scan(...)` calls: the references the front door prunes;
* `ns.t` that DuckDB binds to nothing but that names a table of the lake's catalog, as INSERT,
  UPDATE and DELETE read it (`Router._resolve_table`): renamed to its view `lake.ns.t`, so a name
  resolves for SELECT as it does for the writes;
* the user's views that read lake tables, replaced by their query where the query binds its
  names there as DuckDB binds them in the view (`inline`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from iceduck.sql import parse_tree as pt
from iceduck.sql.names import KINDS, Objects, Session, UserView, view_path

SCAN_FUNCTION = "iceberg_scan"
# Levels of views over views inlined at most.
INLINE_DEPTH = 8

# parts of a name -> (database, namespace, table) of the lake table's view it names, or None
Implicit = Callable[[tuple[str, ...]], tuple[str, str, str] | None]


@dataclass(frozen=True, slots=True)
class LakeReference:
    """A reference to a lake table's view: the tree node and the view as DuckDB spells it."""

    ref: pt.TableRef
    database: str
    schema: str
    name: str


class References:
    """Resolution of the table references of one DuckDB session's statements (see the module doc)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, session: Session, databases: frozenset[str]) -> None:
        self.con = con
        self.session = session
        self.objects = Objects(con, databases)
        self._reading: frozenset[tuple[str, str, str]] | None = None
        self._trees: dict[tuple[str, str, str], pt.Node | None] = {}

    # -- what a name binds to ----------------------------------------------------------------------

    def place(self, ref: pt.TableRef) -> tuple[str, str, str] | None:
        """The lowercase (database, schema, name) a BASE_TABLE reference binds to, or None (a CTE,
        a name not found or not resolved exactly here, a reference with `AT (...)`)."""
        if ref.kind != pt.BASE_TABLE or ref.is_cte or ref.node.get("at_clause") is not None:
            return None
        low = tuple(x.lower() for x in ref.parts)
        if len(low) == 3:
            return (low[0], low[1], low[2])
        if len(low) == 1 and ("temp", "main", low[0]) in self.session.user_views:
            return ("temp", "main", low[0])  # temp.main comes first on every path
        if self.session.path is None or len(low) not in (1, 2):
            return None
        found = self.objects.resolve(self.session.path, low, "relation", self.session.database)
        return None if found is None else (*found, low[-1])

    def rename_implicit(self, tree: pt.Node, implicit: Implicit) -> bool:
        """Rename each `ns.t` DuckDB binds to nothing that `implicit` finds in the lake to its view
        `lake.ns.t`; whether any was renamed."""
        renamed = False
        for ref in list(pt.table_refs(tree)):
            if ref.kind != pt.BASE_TABLE or len(ref.parts) != 2 or ref.node.get("at_clause") is not None:
                continue
            if self.session.path is None or self.place(ref) is not None:
                continue
            found = implicit(ref.parts)
            if found is None:
                continue
            database, schema, name = found
            ref.node["catalog_name"], ref.node["schema_name"], ref.node["table_name"] = database, schema, name
            ref.node["qualified_name"]["path"] = [database, schema, name]
            renamed = True
        return renamed

    def lake(self, tree: pt.Node) -> list[LakeReference]:
        """The references to the lake tables' views in the tree."""
        out = []
        for ref in pt.table_refs(tree):
            place = self.place(ref)
            spelled = None if place is None else self.session.lake_views.get(place)
            if spelled is not None:
                out.append(LakeReference(ref, *spelled))
        return out

    @staticmethod
    def scans(tree: pt.Node) -> list[pt.TableRef]:
        """The `iceberg_scan(...)` calls standing as table references in the tree."""
        return [r for r in pt.table_refs(tree) if r.kind == pt.TABLE_FUNCTION and r.function == SCAN_FUNCTION]

    # -- the user's views --------------------------------------------------------------------------

    def view_tree(self, view: UserView) -> pt.Node | None:
        """A copy of the parse tree of a view's query."""
        if view.key not in self._trees:
            self._trees[view.key] = pt.parse_query(self.con, view.query)
        found = self._trees[view.key]
        return None if found is None else pt.copy_tree(found)

    def reading_views(self) -> frozenset[tuple[str, str, str]]:
        """The user views whose query reads (maybe through other views) a lake view or iceberg_scan."""
        if self._reading is not None:
            return self._reading
        direct: set[tuple[str, str, str]] = set()
        mentions_views: dict[tuple[str, str, str], set[str]] = {}
        names = {key[2] for key in self.session.user_views}
        for key, view in self.session.user_views.items():
            tree = self.view_tree(view)
            refs = [] if tree is None else list(pt.table_refs(tree))
            if any(
                (r.kind == pt.TABLE_FUNCTION and r.function == SCAN_FUNCTION)
                or (r.kind == pt.BASE_TABLE and tuple(x.lower() for x in r.parts) in self.session.lake_views)
                for r in refs
            ):
                direct.add(key)
            mentions_views[key] = {r.parts[-1].lower() for r in refs if r.kind == pt.BASE_TABLE} & names
        found = set(direct)
        grew = True
        while grew:
            grew = False
            reading = {key[2] for key in found}
            for key, mentioned in mentions_views.items():
                if key not in found and mentioned & reading:
                    found.add(key)
                    grew = True
        self._reading = frozenset(found)
        return self._reading

    def names_reading_views(self, tree: pt.Node) -> bool:
        """Whether a reference of the tree names a user's view that reads lake tables."""
        reads = self.reading_views()
        return any(place in reads for place in map(self.place, pt.table_refs(tree)) if place is not None)

    def inline(self, tree: pt.Node) -> bool:
        """Replace each reference to a user's view that reads lake tables by the view's query as a
        subquery of the same name and columns, so the front door sees (and prunes) the lake
        references inside; nested views too. Whether any was replaced.

        Only where the inlined query binds its names as DuckDB binds the view: the reference names
        the view on the statement's search path (`place`); a persistent view is one of the current
        database, whose names each resolve on the view's path (its own schema comes after
        `temp.main`) to where they resolve on the statement's (a temporary view binds like the
        statement); no table the view reads may be a CTE in scope at the reference (a view never
        sees those). Every other reference stays as written (read unpruned)."""
        reads = self.reading_views()
        changed = False
        for _ in range(INLINE_DEPTH):
            edits: list[tuple[pt.TableRef, pt.Node]] = []
            for ref in pt.table_refs(tree):
                place = self.place(ref)
                view = None if place is None or place not in reads else self.session.user_views.get(place)
                if view is None:
                    continue
                inlined = self._inlined(view, ref)
                if inlined is not None:
                    edits.append((ref, inlined))
            if not edits:
                break
            for ref, node in edits:
                ref.replace(node)
            changed = True
        return changed

    def _inlined(self, view: UserView, ref: pt.TableRef) -> pt.Node | None:
        """The view's query as a subquery reference replacing `ref`, or None when the inlined
        query might bind a name otherwise than the view does."""
        if ref.node.get("column_name_alias"):
            return None  # the reference renames the view's columns itself
        query = self.view_tree(view)
        if query is None:
            return None
        if any(r.kind == pt.BASE_TABLE and len(r.parts) == 1 and r.parts[0].lower() in ref.ctes
               for r in pt.table_refs(query)):  # fmt: skip
            return None
        session = self.session
        if not view.temporary:  # (DuckDB binds a temporary view's names as it binds the statement's)
            # A view of another database binds a name qualified by a schema only (`s1.k`, and
            # `db.s1.k` of its own database, which DuckDB keeps as `s1.k`) in its own database first:
            # only the current database's views are inlined.
            if session.path is None or view.database.lower() != session.database:
                return None
            own = view_path(view, session)
            for _, parts in pt.qualified_names(query):
                if len(parts) <= 2 and any(
                    self.objects.resolve(own, parts, kind, session.database)
                    != self.objects.resolve(session.path, parts, kind, session.database)
                    for kind in KINDS
                ):
                    return None  # the name binds elsewhere for the view than for the statement
        columns = [
            str(r[0])
            for r in self.con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = ? "
                "AND table_name = ? ORDER BY column_index",
                [view.database, view.schema, view.name],
            ).fetchall()
        ]
        if not columns:
            return None
        alias = str(ref.node.get("alias") or "") or ref.parts[-1]
        return pt.subquery_ref(self.con, query, alias, columns, ref.node)
