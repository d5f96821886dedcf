"""Reports over pooled attempt records (Markdown; the terminal table is in progress.py)."""

from .markdown import render_markdown

__all__ = ["render_markdown"]
