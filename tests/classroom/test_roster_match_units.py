# hw4p1: instructor-only
"""Which roster row a grade row's member is (autograder/classroom/roster_match.py), rule by rule:
the keys a roster row is reached by (case and spaces ignored, a login only for a course domain),
each rule of the join in order with the words of every miss, a contradiction between rules
imported for nobody, and the TA's files naming a student. Every expected value is worked out by
hand here.

    .venv/bin/python -m pytest -q -n 0 tests/classroom/test_roster_match_units.py
"""
import pytest

from autograder.classroom.roster_match import (domain_of, keys_of, match, roster_index,
                                               student_position)

DOMAINS = ("x.edu",)
# Ann is reached by a SIS User ID in other case and spaces, an upper-case login address of the
# course domain and a private email; Bo by a bare login; Cy and Di share an email address.
ROSTER = [{"SIS User ID": " S0042 ", "SIS Login ID": " Ann@X.edu ", "Email": "ann.lee@Gmail.com"},
          {"SIS User ID": "", "SIS Login ID": "BChen", "Email": None},
          {"SIS User ID": "0044", "SIS Login ID": "cy@y.org", "Email": "shared@y.org"},
          {"SIS User ID": "0045", "SIS Login ID": "di@y.org", "Email": "shared@y.org"}]
INDEX = roster_index(ROSTER, DOMAINS)


def member(sid: str = "", email: str = "") -> dict[str, str]:
    return {"name": "", "sid": sid, "email": email}


def test_the_domain_is_after_the_last_at_sign():
    assert domain_of("a@b@x.edu") == "x.edu"
    assert domain_of("ann@x.edu") == "x.edu"
    assert domain_of("ann") == ""


def test_a_roster_row_is_reached_by_its_keys_in_lower_case_without_spaces():
    assert keys_of(ROSTER[0], DOMAINS) == {"sid:s0042", "email:ann@x.edu", "login:ann",
                                           "email:ann.lee@gmail.com"}
    assert keys_of(ROSTER[0]) == {"sid:s0042", "email:ann@x.edu", "email:ann.lee@gmail.com"}
    assert keys_of(ROSTER[1], DOMAINS) == {"login:bchen"}
    assert keys_of({"SIS User ID": "  ", "Email": "cy@y.org"}, DOMAINS) == {"email:cy@y.org"}


def test_the_index_lists_every_row_a_key_reaches():
    assert INDEX["email:shared@y.org"] == [2, 3]
    assert (INDEX["sid:s0042"], INDEX["login:bchen"], INDEX["sid:0045"]) == ([0], [1], [3])
    assert "login:cy" not in INDEX  # y.org is no course domain


def test_each_rule_reaches_its_row_ignoring_case_and_spaces():
    assert match(member(sid="s0042 "), INDEX, DOMAINS) == ([0], "SID s0042")
    assert match(member(email=" ANN.LEE@gmail.COM"), INDEX, DOMAINS) == (
        [0], "email ann.lee@gmail.com")
    assert match(member(email="bchen@X.edu"), INDEX, DOMAINS) == ([1], "login bchen (x.edu)")
    # the first rule that reaches one row decides; a later one reaching it among others agrees
    assert match(member(sid="0044", email="shared@y.org"), INDEX, DOMAINS) == ([2], "SID 0044")
    assert match(member(sid="0044", email="nobody@y.org"), INDEX, DOMAINS) == ([2], "SID 0044")


def test_a_miss_names_every_rule_tried_and_why():
    assert match(member(sid="9", email="bchen@x.edu"), INDEX, ()) == ([], (
        "SID 9 is not on the roster; email bchen@x.edu is not on the roster; login not tried "
        "(x.edu is not a course domain: --domain gives them)"))
    assert match(member(email="bchen@z.edu"), INDEX, DOMAINS) == ([], (
        "no SID; email bchen@z.edu is not on the roster; login not tried (z.edu is not a course "
        "domain)"))
    assert match(member(email="bchen"), INDEX, DOMAINS) == ([], (
        "no SID; email bchen is not on the roster; login not tried (no domain is not a course "
        "domain)"))
    assert match(member(sid="9"), INDEX, DOMAINS) == ([], "SID 9 is not on the roster; no email")
    assert match(member(email="shared@y.org"), INDEX, DOMAINS) == ([], (
        "no SID; email shared@y.org is on 2 roster rows; login not tried (y.org is not a course "
        "domain)"))


def test_rules_that_reach_different_rows_import_for_none_of_them():
    assert match(member(sid="0045", email="ann@x.edu"), INDEX, DOMAINS) == ([0, 3], (
        "SID 0045 and email ann@x.edu reach different roster rows (correct the SID or email on "
        "the platform)"))
    assert match(member(sid="S0042", email="shared@y.org"), INDEX, DOMAINS) == ([0, 2, 3], (
        "SID S0042 and email shared@y.org reach different roster rows (correct the SID or email "
        "on the platform)"))


def test_an_alias_is_tried_after_the_email_only_when_asked():
    index = {**INDEX, "alias:a.lee@home.net": [0]}
    alias = member(email="A.Lee@home.net")
    assert match(alias, index, DOMAINS, aliases=True) == ([0], "alias a.lee@home.net")
    assert match(alias, index, DOMAINS) == ([], (
        "no SID; email a.lee@home.net is not on the roster; login not tried (home.net is not a "
        "course domain)"))
    assert match(member(email="x@home.net"), index, DOMAINS, aliases=True) == ([], (
        "no SID; email x@home.net is not on the roster; alias x@home.net is not in the aliases "
        "file; login not tried (home.net is not a course domain)"))


def test_a_ta_s_file_names_one_student_by_sid_email_or_login():
    assert student_position(INDEX, " S0042", "ext.csv line 2") == 0
    assert student_position(INDEX, "ANN.LEE@gmail.com", "ext.csv line 2") == 0
    assert student_position(INDEX, "bchen ", "ext.csv line 3") == 1
    with pytest.raises(SystemExit, match=r"^ext.csv line 4: 'shared@y.org' is on several roster "
                                         r"rows: give their SIS User ID"):
        student_position(INDEX, "shared@y.org", "ext.csv line 4")
    with pytest.raises(SystemExit, match=r"^ext.csv line 5: 'zed' is on no roster rows"):
        student_position(INDEX, "zed", "ext.csv line 5")
