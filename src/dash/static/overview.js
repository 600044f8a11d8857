// The overview's feed of recent retry attempts, served as /static/overview.js
// (the pages carry no inline script): /api/feed read now and every 10 s.
async function feed() {
  try {
    const r = await fetch('/api/feed');
    if (!r.ok) return;
    const items = await r.json();
    const ul = document.getElementById('feed');
    ul.textContent = '';
    if (items.length === 0) {
      const li = document.createElement('li');
      li.className = 'muted';
      li.textContent = 'No retries found yet.';
      ul.appendChild(li);
    }
    for (const it of items) {
      const li = document.createElement('li');
      const sw = document.createElement('span');
      sw.className = 'sw ' + it.verdict;
      li.appendChild(sw);
      const a = document.createElement('a');
      a.href = '/traces/' + encodeURIComponent(it.trace_id) + '?day=' + encodeURIComponent(it.day);
      a.textContent = it.text;
      li.appendChild(a);
      ul.appendChild(li);
    }
  } catch (e) {}
}
feed();
setInterval(feed, 10000);
