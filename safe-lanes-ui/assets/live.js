// Keeps the page current: when the grants or requests change (this page, another tab, the
// command line, an agent's request), the server says so over /events and the page fetches
// itself again and swaps its content in. A form the human has started filling in is never
// swapped away: a banner says the page is out of date instead.
"use strict";
(() => {
  const status = document.getElementById("live");
  const banner = document.getElementById("changed");
  let edited = false;
  document.addEventListener("input", (event) => {
    if (event.target.closest("main form")) edited = true;
  });
  document.getElementById("refresh").addEventListener("click", () => location.reload());

  async function refresh() {
    if (edited) {
      banner.hidden = false;
      return;
    }
    const response = await fetch(location.href, { headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const fresh = new DOMParser()
      .parseFromString(await response.text(), "text/html")
      .getElementById("main");
    const main = document.getElementById("main");
    if (fresh && main) {
      main.replaceChildren(...fresh.childNodes);
      document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    }
  }

  // A stream the server ended (it keeps a few per session) reconnects by itself; what changed
  // while it was away is fetched once it is back.
  let away = false;
  const events = new EventSource("/events");
  events.addEventListener("changed", () => { refresh().catch(() => {}); });
  events.addEventListener("open", () => {
    status.textContent = "live";
    status.classList.remove("off");
    if (away) refresh().catch(() => {});
    away = false;
  });
  events.addEventListener("error", () => {
    away = true;
    status.textContent = "not updating (the server stopped?)";
    status.classList.add("off");
  });
})();
