"""Authoring: the release made from ``solutions/`` (:mod:`.release`), the solutions executed
(:mod:`.execute`), curated wrong answers proven rejected (:mod:`.mistakes`, :mod:`.rejection`),
the numbers the prose quotes (:mod:`.quoted`) and the student distribution (:mod:`.distribution`)."""
