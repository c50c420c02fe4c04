"""The whole knowledge base (playbooks + tree), loaded once and checked as one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from debug_stuck.contract import CAUSE_IDS
from debug_stuck.core.knowledge import Playbook, Problem, load_playbooks
from debug_stuck.core.tree import Tree, load_tree
from debug_stuck.errors import KnowledgeError
from debug_stuck.paths import skills_dir
from debug_stuck.tables import check_tables


@dataclass
class Knowledge:
    playbooks: Dict[str, Playbook]
    tree: Tree
    folder: Path

    def signals(self):
        for book in self.playbooks.values():
            yield from book.signals


def check_knowledge(folder: Optional[Path] = None):
    """Return (Knowledge or None, [Problem]): every problem in the folder, not just the first."""
    folder = folder or skills_dir()
    if not folder.is_dir():
        return None, [Problem(str(folder), "folder", "the knowledge base folder does not exist")]
    playbooks, problems = load_playbooks(folder)
    for cause in CAUSE_IDS:
        if cause not in playbooks and not any(p.file == f"{cause}.md" for p in problems):
            problems.append(Problem(f"{cause}.md", "file", f"missing: no playbook for cause {cause!r}"))
    tree, tree_problems = load_tree(folder)
    problems.extend(tree_problems)
    problems.extend(Problem(file, field, message) for file, field, message in check_tables(folder))
    if tree is not None:
        problems.extend(tree.validate(playbook_ids=set(playbooks)))
        problems.extend(_pattern_consistency(tree, playbooks))
    if tree is None:
        return None, problems
    return Knowledge(playbooks=playbooks, tree=tree, folder=folder), problems


def _pattern_consistency(tree: Tree, playbooks: Dict[str, Playbook]) -> List[Problem]:
    """A cause named under a pattern's subtree must list that pattern in its playbook."""
    problems: List[Problem] = []

    def visit(node_id: str, pattern: Optional[str]) -> None:
        node = tree.nodes.get(node_id)
        if node is None:
            return
        pattern = node.pattern or pattern
        for cause in node.causes:
            book = playbooks.get(cause)
            if book and pattern and pattern not in book.patterns:
                problems.append(
                    Problem(
                        f"{cause}.md",
                        "patterns",
                        f"lacks {pattern}: tree node {node_id!r} names it under pattern {pattern}",
                    )
                )
        for child in node.branches.values():
            visit(child, pattern)

    if tree.root in tree.nodes:
        visit(tree.root, None)
    return problems


_cache: Dict[Path, Knowledge] = {}


def load_knowledge(folder: Optional[Path] = None) -> Knowledge:
    """Load and check; raise KnowledgeError naming file:field of the first problem."""
    folder = (folder or skills_dir()).resolve()
    if folder in _cache:
        return _cache[folder]
    knowledge, problems = check_knowledge(folder)
    if problems or knowledge is None:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise KnowledgeError(
            f"knowledge base is broken: {problems[0]}{more}",
            "run 'debug-stuck skills check' for the full list",
        )
    _cache[folder] = knowledge
    return knowledge
