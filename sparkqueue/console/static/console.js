// The console's only script: parts of a page marked data-refresh="URL" are fetched again every
// two seconds and replaced by the server's HTML (rendered and escaped there, as the page was).
"use strict";
const REFRESH_MS = 2000;

async function refresh(element) {
  try {
    const answer = await fetch(element.dataset.refresh, { credentials: "same-origin", cache: "no-store" });
    if (answer.redirected) {
      window.location.reload(); // signed out meanwhile: the page itself goes to the sign-in
    } else if (answer.ok) {
      element.innerHTML = await answer.text();
    }
  } catch (error) {
    // the server restarting or the network gone: keep what is shown, try again next time
  }
}

document.querySelectorAll("[data-refresh]").forEach((element) => {
  setInterval(() => refresh(element), REFRESH_MS);
});
