"""The web inspector (issue 11 §5): a session's timeline, summary segments, facts,
recall, budget split and per-turn plots, server-rendered, updating live.

``routes.router`` is mounted by ``server.app.create_app``; ``render`` and ``page`` are
pure functions from a ``session.timeline.Timeline`` to HTML; ``plots`` draws the SVG.
"""
