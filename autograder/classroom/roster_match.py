"""Who a grades.csv row is on a Canvas roster: the keys a roster row is reached by (SID, email,
login of a course domain) and the rules a grade row's member is matched with, in order, for the
gradebook's join (``autograder/classroom/gradebook.py``'s docstring, "The join")."""
from __future__ import annotations


def domain_of(email: str) -> str:
    return email.rsplit("@", 1)[1] if "@" in email else ""


def keys_of(roster_row: dict, domains: tuple[str, ...] = ()) -> set[str]:
    """What a roster row is reached by: ``sid:<SIS User ID>``, ``email:<address>`` and
    ``login:<name>`` (a bare SIS Login ID, or the name of an address of a course domain), in
    lower case."""
    keys = set()
    if roster_row.get("SIS User ID", "").strip():
        keys.add(f"sid:{roster_row['SIS User ID'].strip().lower()}")
    for column in ("SIS Login ID", "Email"):
        login = (roster_row.get(column) or "").strip().lower()
        if "@" in login:
            keys.add(f"email:{login}")
            if domain_of(login) in domains:
                keys.add(f"login:{login.split('@')[0]}")
        elif login:
            keys.add(f"login:{login}")
    return keys


def roster_index(roster: list[dict], domains: tuple[str, ...]) -> dict[str, list[int]]:
    """{key: the roster positions it reaches} (see :func:`keys_of`)."""
    index: dict[str, list[int]] = {}
    for position, roster_row in enumerate(roster):
        for key in keys_of(roster_row, domains):
            index.setdefault(key, []).append(position)
    return index


def match(member: dict[str, str], index: dict[str, list[int]], domains: tuple[str, ...],
          aliases: bool = False) -> tuple[list[int], str]:
    """([the roster position of a grade row's member], the rule that reached it), ([], every
    rule tried and why it did not match), or (every position reached, why) when its rules reach
    different roster rows (a SID typed for someone else): imported for none of them.
    ``aliases``: the index holds the TA's aliases (``alias:<address>``), tried after the email."""
    sid, email = member["sid"].strip(), member["email"].strip().lower()
    login = email.split("@")[0] if domain_of(email) in domains else ""
    tried, found = [], None
    rules = (("SID", sid, f"sid:{sid.lower()}"), ("email", email, f"email:{email}"),
             *([("alias", email, f"alias:{email}")] if aliases else []),
             ("login", login, f"login:{login}"))
    for rule, value, key in rules:
        if rule == "login" and email and not login:
            tried.append(f"login not tried ({domain_of(email) or 'no domain'} is not a course "
                         f"domain{'' if domains else ': --domain gives them'})")
        if not value:
            if rule not in ("login", "alias"):
                tried.append(f"no {rule}")
            continue
        hits = index.get(key, [])
        shown = f"{rule} {value}" + (f" ({domain_of(email)})" if rule == "login" else "")
        if found is not None:
            # a later rule that reaches only other students contradicts the first (a SID typed
            # for someone else): the grade is nobody's until the platform's roster is corrected
            if hits and found[0] not in hits:
                return sorted({found[0], *hits}), (
                    f"{found[1]} and {shown} reach different roster rows (correct the SID or "
                    f"email on the platform)")
        elif len(hits) == 1:
            [position] = hits
            found = position, shown
        else:
            tried.append(f"{shown} is on {len(hits)} roster rows" if hits else
                         f"{shown} is not in the aliases file" if rule == "alias" else
                         f"{shown} is not on the roster")
    return ([found[0]], found[1]) if found else ([], "; ".join(tried))


def student_position(index: dict[str, list[int]], text: str, where: str) -> int:
    """The roster position a TA's file names by SIS User ID, SIS Login ID or email (``text``);
    SystemExit at ``where`` when it names none or several."""
    student = text.strip().lower()
    hits = {p for kind in ("sid", "email", "login") for p in index.get(f"{kind}:{student}", [])}
    if len(hits) != 1:
        raise SystemExit(f"{where}: {text!r} is {'on several' if hits else 'on no'} roster rows: "
                         f"give their SIS User ID, SIS Login ID or email as the roster has it")
    return hits.pop()
