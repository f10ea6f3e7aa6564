"""Paths the README and the docs name (in backticks or Markdown links) exist in the repository, and the
README does not point outside it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "charts" / "draq" / "README.md",
         *sorted((REPO / "docs").glob("*.md"))]
ROOTS = ("admission/", "bench/", "charts/", "crds/", "dashboards/", "docs/", "e2e/", "examples/", "scripts/",
         "tests/", ".github/")
NAMED = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)")


def named_paths(text: str) -> set[str]:
    found = set()
    for match in NAMED.finditer(text):
        path = (match.group(1) or match.group(2)).rstrip(".,:;")
        if path.startswith(ROOTS) and not any(c in path for c in "<>*{}$|"):
            found.add(path.split("::")[0].split(":")[0])
    return found


def test_every_named_path_exists() -> None:
    assert sum(len(named_paths(page.read_text())) for page in PAGES) >= 200  # the pages do name paths
    missing = [f"{page.relative_to(REPO)}: {path}" for page in PAGES for path in sorted(named_paths(page.read_text()))
               if not (REPO / path).exists()]
    assert not missing, "\n".join(missing)


def test_the_readme_stays_inside_the_repository() -> None:
    text = (REPO / "README.md").read_text()
    assert "../" not in text and ".ci/run" not in text


SECTION = re.compile(r"(docs/[a-z-]+\.md), [\"*]([^\"*]+)[\"*]")


def test_every_named_section_exists() -> None:
    """`(docs/install.md, "5. Uninstall")` and `docs/limitations.md` (*Quota*) name a heading of the page."""
    sources = [*PAGES, REPO / "charts" / "draq" / "values.yaml"]
    named = [(source, page, title) for source in sources for page, title in SECTION.findall(source.read_text())]
    assert len(named) >= 5
    missing = []
    for source, page, title in named:
        headings = [line.lstrip("#").strip() for line in (REPO / page).read_text().splitlines()
                    if line.startswith("#")]
        if not any(heading.startswith(title) for heading in headings):
            missing.append(f"{source.relative_to(REPO)}: {page}, {title!r}")
    assert not missing, "\n".join(missing)
