"""The authors' marks (``<!--q-->``, ``<!--nq-->``) come out of the release; nothing else of the prose does
(the release itself: ``tests/course/test_release_sync.py``)."""

from __future__ import annotations

from course_grader.authoring.author_marks import strip_author_marks


def test_strip_author_marks_takes_the_marks_and_nothing_else():
    text = ('reaches 96.8%<!--q held-out--> at 4.5<!--nq--> of 22–24<!--q 22-24--> and <!--q--> '
            '<!-- quoted cpu cell-042: "test 64.9 ± 11.8%" --> but <!-- an instructor\'s note --> stays')
    assert strip_author_marks(text) == "reaches 96.8% at 4.5 of 22–24 and   but <!-- an instructor's note --> stays"
