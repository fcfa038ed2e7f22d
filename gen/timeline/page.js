"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const div = data.divergence;
  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text; // values are shown as text, never as markup
    return e;
  }
  const show = (v) => (v === undefined ? "(none)" : JSON.stringify(v, null, 2));
  $("summary").textContent = data.runs.map((r) => r.label + ": " + r.status + " (" + r.attempts.length + " attempts)").join("  |  ") +
    (div ? "  |  diverged at node " + div.node + " (" + div.what + ")" : "");

  function openPanel(run, a, bar) {
    document.querySelectorAll(".bar.selected").forEach((b) => b.classList.remove("selected"));
    bar.classList.add("selected");
    $("panel").hidden = false;
    $("panel-title").textContent = a.node + " (" + a.kind + ")";
    $("panel-meta").textContent = run.label + " · attempt " + a.attempt + " · iteration " + a.iteration +
      " · +" + a.start_ms + " ms · " + a.duration_ms + " ms · " + a.status + (a.branch ? " · branch " + a.branch : "");
    const reqs = (a.input || []).map((seq) => run.requests[seq]).filter(Boolean)
      .map((x) => ({ kind: x.kind, request: x.request, response: x.response, error: x.error }));
    $("panel-input").textContent = reqs.length ? show(reqs) : "(no outside request)";
    $("panel-output").textContent = show(a.output);
    $("panel-error").hidden = $("panel-error-title").hidden = !a.error;
    $("panel-error").textContent = a.error ? a.error.class + ": " + a.error.message : "";
    const cmp = div && div.node === a.node;
    $("panel-compare").hidden = !cmp;
    if (cmp) { $("panel-old").textContent = show(div.old); $("panel-new").textContent = show(div.new); }
  }

  data.runs.forEach((run, ri) => {
    const lane = el("section", "lane");
    lane.dataset.run = String(ri);
    lane.appendChild(el("h2", "", run.label + " — " + run.workflow + " — " + run.status));
    const axis = el("div", "axis");
    for (let i = 0; i <= 4; i++) {
      const t = el("span", "tick", Math.round((run.total_ms * i) / 4) + " ms");
      t.style.left = i * 25 + "%";
      axis.appendChild(t);
    }
    lane.appendChild(axis);
    run.attempts.forEach((a) => {
      const row = el("div", "row");
      const diverged = div && ri > 0 && a.node === div.node;
      if (diverged) row.classList.add("diverged");
      let name = "  ".repeat(a.depth) + a.node;
      if (a.iteration > 1) name += " · iteration " + a.iteration;
      if (a.attempt > 1) name += " · retry " + (a.attempt - 1);
      row.appendChild(el("span", "label", name));
      const track = el("div", "track");
      const bar = el("button", "bar");
      bar.type = "button";
      bar.dataset.node = a.node;
      bar.dataset.attempt = String(a.attempt);
      bar.title = a.node + ": " + a.status;
      if (a.attempt > 1) bar.classList.add("retry");
      if (a.status === "error") bar.classList.add("error");
      if (a.status === "fail") bar.classList.add("fail");
      if (diverged) bar.classList.add("diverged");
      const left = Math.min((100 * a.start_ms) / run.total_ms, 99.5); // an instant at the end stays visible
      bar.style.left = left + "%";
      bar.style.width = Math.max((100 * a.duration_ms) / run.total_ms, 0.5) + "%";
      bar.addEventListener("click", () => openPanel(run, a, bar));
      track.appendChild(bar);
      if (a.branch) {
        const b = el("span", "branch", a.branch);
        b.style.left = "calc(" + Math.min(left, 85) + "% + 6px)";
        track.appendChild(b);
      }
      row.appendChild(track);
      lane.appendChild(row);
    });
    $("lanes").appendChild(lane);
  });

  // #test-click=NODE opens NODE's panel on load (a headless browser test
  // has no mouse); the last lane is the replay when there are two.
  const m = /^#test-click=(.+)$/.exec(location.hash);
  if (m) {
    const node = decodeURIComponent(m[1]);
    const bars = Array.from(document.querySelectorAll(".bar")).filter((b) => b.dataset.node === node);
    if (bars.length) bars[bars.length - 1].click();
  }
})();
