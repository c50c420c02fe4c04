"""The edit in the user's own code: where the blocking frame (or the call that made the blocking
object) is in the user's source, the line and the suggested change as a unified diff.

The rules are data, per cause, in the playbooks' frontmatter (`edits:`): a call to look for and
what to do to it: add a keyword argument (`DataLoader(...)` gets `timeout=`), wrap the call
(`input()` guarded by `sys.stdin.isatty()`), or replace its statement (a save to a temporary file,
then `os.replace`). Files are read bounded and parsed with `ast`, never imported or run.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from debug_stuck.advice.facts import JobFacts, is_library_frame, own_code_roots
from debug_stuck.recovery.reading import bounded_read

MAX_SOURCE_BYTES = 2 * 1024 * 1024


@dataclass
class Edit:
    cause: str
    rule: int  # index into the playbook's `edits`
    file: str
    line: int  # the call's first line
    call: str
    why: str
    diff: str
    sha256: str  # of the file as read: --apply refuses a file changed since
    found: str  # "blocking frame" or "where the blocking object is made"
    new_text: str = ""

    def to_dict(self) -> dict:
        return {
            "cause": self.cause,
            "rule": self.rule,
            "file": self.file,
            "line": self.line,
            "call": self.call,
            "why": self.why,
            "found": self.found,
            "diff": self.diff,
            "sha256": self.sha256,
            "safety": {"label": "edit", "text": "an edit to your code; nothing runs now"},
        }


def propose_edits(report, facts: JobFacts, knowledge=None) -> List[Edit]:
    """At most one edit per cause, for the first diagnoses, from the frames of the job's stacks; none
    for a job that progresses (nothing of it to fix)."""
    if not report.diagnoses or not report.processes or report.verdict.state == "progressing":
        return []
    frames = _user_frames(report)
    if not frames:
        return []
    if knowledge is None:
        from debug_stuck.kb import load_knowledge

        knowledge = load_knowledge()
    out: List[Edit] = []
    for diagnosis in report.diagnoses[:2]:
        book = knowledge.playbooks.get(diagnosis.cause)
        rules = getattr(book, "edits", None) or []
        edit = _first_edit(diagnosis.cause, rules, frames)
        if edit is not None and all(e.file != edit.file or e.line != edit.line for e in out):
            out.append(edit)
    return out


def _user_frames(report) -> List[Tuple[str, int]]:
    """(file, line) of the job's own Python frames, innermost first: the chain's threads first."""
    chain_tids = {(hop.get("pid"), (hop.get("thread") or {}).get("tid")) for hop in report.chain or []}
    ordered = []
    for process in report.processes:
        for thread in process.get("threads") or []:
            key = (process["pid"], thread.get("tid"))
            ordered.append((0 if key in chain_tids else 1, thread))
    ordered.sort(key=lambda t: t[0])
    out: List[Tuple[str, int]] = []
    roots = own_code_roots(report.processes)
    for _, thread in ordered:
        for frame in thread.get("frames") or []:
            path, line = frame.get("path") or frame.get("file") or "", frame.get("line")
            if frame.get("native") or not line or not path.endswith(".py") or not os.path.isabs(path):
                continue
            if is_library_frame(frame, roots) or (path, line) in out:
                continue
            out.append((path, int(line)))
    return out


def _first_edit(cause: str, rules: List[dict], frames: List[Tuple[str, int]]) -> Optional[Edit]:
    sources: Dict[str, Optional[str]] = {}
    for anywhere in (False, True):  # the blocking frame's own statement first, then the whole file
        for path, line in frames:
            if path not in sources:
                sources[path] = read_source(path)
            text = sources[path]
            if text is None:
                continue
            for index, rule in enumerate(rules):
                if anywhere and not rule.get("anywhere"):
                    continue
                edit = edit_at(cause, index, rule, path, text, None if anywhere else line)
                if edit is not None:
                    return edit
    return None


def read_source(path: str) -> Optional[str]:
    """The exact text of a source file to edit: None for a link (an edit must not write through one),
    a file too big to be a script, or one that is not UTF-8 (a diff of a guess would be wrong)."""
    from debug_stuck.inputs import InputError, read_input

    if bounded_read(lambda: os.path.islink(path), f"lstat {path}", True):
        return None
    try:
        raw = read_input(path, "source", MAX_SOURCE_BYTES + 1)
        return None if len(raw) > MAX_SOURCE_BYTES else raw.decode("utf-8")
    except (InputError, UnicodeDecodeError):
        return None


def edit_at(cause: str, index: int, rule: dict, path: str, text: str, line: Optional[int]) -> Optional[Edit]:
    """The rule applied to the first matching call in the statement at `line` (or anywhere in the
    file when line is None); None when there is no such call or it needs no change."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines(keepends=True)
    for statement, call in _calls(tree, rule["call"], line):
        new_lines = _apply(rule, call, statement, lines, tree)
        if new_lines is None or new_lines == lines:
            continue
        new_text = "".join(new_lines)
        diff = "".join(
            difflib.unified_diff(lines, new_lines, f"a/{os.path.basename(path)}", f"b/{os.path.basename(path)}")
        )
        return Edit(
            cause=cause,
            rule=index,
            file=path,
            line=call.lineno,
            call=_call_name(call),
            why=str(rule.get("why", "")),
            diff=diff,
            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            found="blocking frame" if line is not None else "where the blocking object is made",
            new_text=new_text,
        )
    return None


def _calls(tree: ast.AST, wanted: str, line: Optional[int]):
    """(statement, call) for calls named `wanted` ("DataLoader", "torch.save", ".result")."""
    for statement in ast.walk(tree):
        if not isinstance(statement, ast.stmt) or isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, (ast.AsyncFunctionDef, ast.If, ast.For, ast.While, ast.With, ast.Try)):
            heads = _head_nodes(statement)
        else:
            heads = [statement]
        start, end = statement.lineno, getattr(statement, "end_lineno", statement.lineno)
        if line is not None and not start <= line <= end:
            continue
        for head in heads:
            for node in ast.walk(head):
                if isinstance(node, ast.Call) and _matches(node, wanted):
                    if line is None or node.lineno <= line <= (node.end_lineno or node.lineno) or head is statement:
                        yield statement, node


def _head_nodes(statement) -> list:
    """The parts of a compound statement that run at its own line (a `for`'s iterable, a `with`'s
    items), not its body: the body's statements are visited on their own."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.iter]
    if isinstance(statement, (ast.If, ast.While)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in statement.items]
    return []


def _matches(call: ast.Call, wanted: str) -> bool:
    name = _call_name(call)
    if wanted.startswith("."):
        return isinstance(call.func, ast.Attribute) and call.func.attr == wanted[1:]
    return name == wanted or name.endswith("." + wanted) or (("." not in wanted) and name.split(".")[-1] == wanted)


def _call_name(call: ast.Call) -> str:
    parts = []
    node = call.func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _apply(rule: dict, call: ast.Call, statement: ast.stmt, lines: List[str], tree: ast.Module):
    if "keyword" in rule:
        if any(k.arg == rule["keyword"] for k in call.keywords):
            return None  # it already has one: nothing to suggest here
        new = _add_keyword(lines, call, f"{rule['keyword']}={rule['value']}")
    elif "wrap" in rule:
        source = _segment(lines, call)
        new = _replace_span(lines, call, rule["wrap"].replace("{call}", source))
    elif "replace" in rule:
        if _renamed_next(tree, statement, call, lines) or _into_open_file(tree, call):
            return None  # it already saves to a temporary path and renames it, or writes a file it opened
        new = _replace_statement(lines, statement, call, rule["replace"])
    else:
        return None
    if new is None:
        return None
    return _add_imports(new, tree, rule.get("imports") or [])


def _offsets(lines: List[str], lineno: int, col: int) -> int:
    """Character index in the line for ast's UTF-8 byte column."""
    return len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _add_keyword(lines: List[str], call: ast.Call, keyword: str) -> Optional[List[str]]:
    end_line, end_col = call.end_lineno, call.end_col_offset
    if end_line is None or end_col is None:
        return None
    new = list(lines)
    row = new[end_line - 1]
    close = _offsets(lines, end_line, end_col) - 1
    if close < 0 or row[close] != ")":
        return None
    before = "".join(new[call.lineno - 1 : end_line - 1]) + row[:close]
    stripped = before.rstrip()
    has_args = bool(call.args or call.keywords)
    if not has_args:
        insert = keyword
    elif stripped.endswith(","):
        insert = (" " if row[:close].endswith(",") else "") + keyword
    else:
        insert = ", " + keyword
    if has_args and "\n" in before[before.find("(") :] and not row[:close].strip():
        # a call laid out one argument per line: the keyword gets its own line, indented alike
        indent = _indent_of(new[end_line - 2]) if end_line >= 2 else ""
        previous = new[end_line - 2].rstrip("\n")
        comma = "" if previous.rstrip().endswith(",") else ","
        new[end_line - 2] = previous + comma + "\n"
        new.insert(end_line - 1, f"{indent}{keyword},\n")
        return new
    new[end_line - 1] = row[:close] + insert + row[close:]
    return new


def _segment(lines: List[str], node: ast.AST) -> str:
    text = "".join(lines[node.lineno - 1 : node.end_lineno])
    start = _offsets(lines, node.lineno, node.col_offset)
    end_in_last = _offsets(lines, node.end_lineno, node.end_col_offset)
    tail = len(lines[node.end_lineno - 1]) - end_in_last
    return text[start : len(text) - tail]


def _replace_span(lines: List[str], node: ast.AST, replacement: str) -> List[str]:
    first = lines[node.lineno - 1][: _offsets(lines, node.lineno, node.col_offset)]
    last = lines[node.end_lineno - 1][_offsets(lines, node.end_lineno, node.end_col_offset) :]
    return lines[: node.lineno - 1] + [first + replacement + last] + lines[node.end_lineno :]


RENAMES = ("os.replace", "os.rename", "shutil.move")


def _into_open_file(tree: ast.Module, call: ast.Call) -> bool:
    """The call writes into a file object a `with` around it opened (`with gzip.open(tmp) as fh:
    torch.save(state, fh)`): its target is no path to rename, and the path is the with's to choose."""
    target = call.args[1] if len(call.args) > 1 else None
    if not isinstance(target, ast.Name):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and node.lineno <= call.lineno <= (node.end_lineno or 0):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == target.id:
                    return True
    return False


def _renamed_next(tree: ast.Module, statement: ast.stmt, call: ast.Call, lines: List[str]) -> bool:
    """The statement after `statement` renames the path the call writes into place (RENAMES with that
    path first, or a pathlib.Path's own replace or rename method): the write is atomic already."""
    if len(call.args) < 2:
        return False
    target = _segment(lines, call.args[1])
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if not isinstance(body, list) or statement not in body:
                continue
            index = body.index(statement)
            nxt = body[index + 1] if index + 1 < len(body) else None
            if not isinstance(nxt, ast.Expr) or not isinstance(nxt.value, ast.Call):
                return False
            rename = nxt.value
            if _call_name(rename) in RENAMES and rename.args:
                return _segment(lines, rename.args[0]) == target
            func = rename.func
            if isinstance(func, ast.Attribute) and func.attr in ("replace", "rename"):
                return _segment(lines, func.value) == target
            return False
    return False


def _replace_statement(lines: List[str], statement: ast.stmt, call: ast.Call, template: str) -> Optional[List[str]]:
    if not isinstance(statement, ast.Expr) or statement.value is not call or len(call.args) < 2:
        return None  # only a bare `save(obj, path)` statement: anything else needs a person
    indent = _indent_of(lines[statement.lineno - 1])
    values = {"call": _call_name(call), "arg0": _segment(lines, call.args[0]), "arg1": _segment(lines, call.args[1])}
    body = template.rstrip("\n").format(**values)
    new_rows = [indent + row + "\n" for row in body.splitlines()]
    return lines[: statement.lineno - 1] + new_rows + lines[statement.end_lineno :]


def _indent_of(row: str) -> str:
    return row[: len(row) - len(row.lstrip())]


def _add_imports(lines: List[str], tree: ast.Module, modules: List[str]) -> List[str]:
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {a.asname or a.name for a in node.names}
    missing = [m for m in modules if m not in imported]
    if not missing:
        return lines
    at = 0
    for node in tree.body:  # after the docstring and the __future__ imports
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]:
            at = node.end_lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            at = node.end_lineno
        else:
            break
    return lines[:at] + [f"import {m}\n" for m in missing] + lines[at:]
