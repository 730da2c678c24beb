"""What the alert webhook sends about an incident (server/incidents/service.py builds it, the
webhook posts it): its event, its URL (the incident's page on the dashboard, at
STACKLENS_PUBLIC_URL) and one line of text a chat tool (a Slack or Mattermost incoming
webhook reads `text`) can post as is, beside the incident's facts as an administrator sees
them.

The line: `[<severity>] stacklens incident <id> <opened | updated | ended | ended unobserved
since <time>>: <title>; likely aggressor: job <a>; victim(s): job <v> [at <site> (<op>)],
... (<n> job(s) hit, <s> s lost | no job hit; since <start> | <start> – <end>) <url>`, a
victim's site the call site whose time rose the most during it (answers.risen), when its
hooks kept call sites. Each job of the JSON lists those sites (`callsites`: signal, key,
label, op, rise), with the link to the job's call-site table over the incident's window
(`callsites_url`). The three characters
Slack's message format reserves (`&`, `<`, `>`) are escaped in the words (a job id may hold
them), never in the URL, which both tools turn into a link.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from presentation.formatting import format_utc_ns
from server.incidents.answers import risen

#: The page of an incident, under the dashboard's address.
PAGE = "/incidents/{id}"
#: The job pages an incident links to show this much time around it (s).
MARGIN_S = 30
#: The DOM id of the job page's call-site card (presentation.cards.card_id("callsites")).
CALLSITES_CARD = "card-callsites"


def incident_window(start_ns: int, end_ns: int | None) -> dict[str, str]:
    """The window the pages an incident links to show (epoch seconds, as their URLs take
    them): from MARGIN_S before its start to as long after its end (open: no `to`)."""
    window = {"from": str(start_ns // 10**9 - MARGIN_S)}
    if end_ns is not None:
        window["to"] = str(-(-end_ns // 10**9) + MARGIN_S)
    return window


def callsites_url(base_url: str, job: str, owner: str | None, start_ns: int,
                  end_ns: int | None) -> str:  # fmt: skip
    """The address of a job's call-site table (its page's card) over an incident's
    window, as its owner's job."""
    params = ({"owner": owner} if owner else {}) | incident_window(start_ns, end_ns)
    return f"{base_url}/jobs/{quote(job, safe='')}?{urlencode(params)}#{CALLSITES_CARD}"


def incident_url(base_url: str, incident_id: int) -> str:
    """The address of an incident's page on the dashboard at `base_url`."""
    return base_url + PAGE.format(id=incident_id)


def _escaped(words: str) -> str:
    """Words with the characters Slack's format reserves escaped."""
    return words.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _jobs_line(jobs: list[dict[str, Any]]) -> list[str]:
    """The likely aggressor and the victims, as the summary line names them."""
    parts = []
    aggressors = [f"job {j['job']}" for j in jobs if j["role"] == "aggressor"]
    victims = [f"job {j['job']}" + _at(j) for j in jobs if j["role"] == "victim"]
    if aggressors:
        parts.append(f"likely aggressor: {', '.join(aggressors)}")
    if victims:
        parts.append(f"victim{'s' if len(victims) > 1 else ''}: {', '.join(victims)}")
    return parts


def _at(job: dict[str, Any]) -> str:
    """` at <site> (<op>)`: the call site whose time rose the most in a job, if any."""
    sites = risen(job)
    return f" at {sites[0][1]['label']} ({sites[0][1]['op']})" if sites else ""


def chat_text(event: str, incident_id: int, row: dict[str, Any], jobs: list[dict[str, Any]],
              url: str) -> str:  # fmt: skip
    """The one line of an `event` (opened, updated, closed) of the incident `row` (as
    stored) with its `jobs` (each with job, role), linking to `url` (module doc)."""
    if event != "closed":
        verb = event
    elif row["unobserved_ns"] is not None:
        verb = f"ended unobserved since {format_utc_ns(row['unobserved_ns'])}"
    else:
        verb = "ended"
    hit = row["hit"]
    size = (f"{hit} job{'s' if hit != 1 else ''} hit, {row['lost_ns'] / 1e9:.1f} s lost" if hit
            else "no job hit")  # fmt: skip
    span = (f"since {format_utc_ns(row['start_ns'])}" if row["end_ns"] is None
            else f"{format_utc_ns(row['start_ns'])} – {format_utc_ns(row['end_ns'])}")  # fmt: skip
    words = "; ".join([row["title"], *_jobs_line(jobs)])
    line = f"[{row['severity']}] stacklens incident {incident_id} {verb}: {words} ({size}; {span})"
    return f"{_escaped(line)} {url}"


def merged_text(incident_id: int, into_id: int, url: str) -> str:
    """The one line saying that an incident became part of another (at `url`)."""
    return f"stacklens incident {incident_id} is now part of incident {into_id} {url}"


def message(event: str, incident_id: int, row: dict[str, Any], jobs: list[dict[str, Any]],
            base_url: str) -> dict[str, Any]:  # fmt: skip
    """The webhook's JSON of an `event` of the incident `row` (as stored) with its `jobs`
    (visible_jobs' rows, in slot order): the event, the URL, the line, the incident."""
    url = incident_url(base_url, incident_id)
    return {
        "event": event,
        "url": url,
        "text": chat_text(event, incident_id, row, jobs, url),
        "incident": {
            "id": incident_id, "url": url, "kind": row["kind"], "severity": row["severity"],
            "title": row["title"], "start_ns": row["start_ns"], "end_ns": row["end_ns"],
            "detected_ns": row["detected_ns"], "unobserved_ns": row["unobserved_ns"],
            "lost_ns": row["lost_ns"], "hit": row["hit"],
            "links": [{k: lk[k] for k in ("id", "a", "b")} for lk in row["links"]],
            "jobs": [{**{k: j[k] for k in ("job", "user", "role", "signals", "ranks", "files",
                                           "link_bytes")},
                      "callsites": [{"signal": kind, **{k: site[k] for k in
                                     ("key", "label", "op", "layer", "rise_ns_per_s")}}
                                    for kind, site in risen(j)],
                      "callsites_url": callsites_url(base_url, j["job"], j["user"],
                                                     row["start_ns"], row["end_ns"])}
                     for j in jobs],
        },
    }  # fmt: skip


def merged(incident_id: int, into_id: int, base_url: str) -> dict[str, Any]:
    """The webhook's JSON saying that an incident became part of another (and is gone)."""
    into = incident_url(base_url, into_id)
    return {
        "event": "merged",
        "url": into,
        "text": merged_text(incident_id, into_id, into),
        "incident": {"id": incident_id},
        "into": {"id": into_id, "url": into},
    }
