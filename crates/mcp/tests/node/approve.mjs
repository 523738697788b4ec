// Approves a proposal on its approval page as a signed-in person does:
// reads the page with the approver's token, posts its Approve form with
// the form token and a same-origin request. Answers the page's origin.

function check(condition, what) {
  if (!condition) throw new Error(`assertion failed: ${what}`);
}

export async function approveOnPage(link, approverToken) {
  const auth = { authorization: `Bearer ${approverToken}` };
  const page = await fetch(link, { headers: auth });
  check(page.status === 200, `approval page answered ${page.status}`);
  const html = await page.text();
  const at = html.indexOf('class="approve"');
  const tag = html.slice(html.lastIndexOf("<form", at), at);
  const action = /action="([^"]+)"/.exec(tag)[1].replaceAll("&amp;", "&");
  const token = /name="token" value="([^"]+)"/.exec(html.slice(at))[1];
  const origin = new URL(link).origin;
  const posted = await fetch(origin + action, {
    method: "POST",
    redirect: "manual",
    headers: { ...auth, "sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token, note: "" }),
  });
  check(posted.status === 303, `approving answered ${posted.status}`);
  return origin;
}
