"""The HTML dashboard: ``GET /kmq/ui`` (queue table) and ``GET /kmq/ui/queue/{queue}`` (one queue).

One self-contained page (inline CSS and JS, no CDN: it works offline) that
reads the JSON API of web/api.py every 2 seconds and draws the rate chart as
inline SVG. With auth on, the token is entered once (a form, or
``#token=...`` in the address, which the page removes at once), kept in the
tab's sessionStorage and sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

from app import app

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kmq queues</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
header form{margin-left:auto;display:flex;gap:6px}
main{padding:16px 20px}
table{border-collapse:collapse;background:#fff;width:100%;margin:8px 0 16px}
th,td{padding:5px 8px;border-bottom:1px solid #e3e5ea;text-align:right;white-space:nowrap}
th{background:#eceef2;cursor:pointer;user-select:none}
th:first-child,td:first-child{text-align:left}
tr.totals td{font-weight:600;background:#fafbfc}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;padding:10px 14px;border-radius:6px;min-width:110px}
.card b{display:block;font-size:22px}
#status{margin:6px 0;color:#555}#status[data-state=error]{color:#b00020;font-weight:600}
.legend span{margin-right:14px}.legend i{display:inline-block;width:12px;height:3px;margin-right:4px;vertical-align:middle}
svg{background:#fff;border-radius:6px}
.muted{color:#777}
</style></head>
<body>
<header><a href="/kmq/ui">kmq</a><span id="where" class="muted"></span>
<form id="tokenform"><input id="token" type="password" placeholder="token (auth on)" size="28">
<button>use token</button></form></header>
<main>
<div id="status" data-state="loading">loading ...</div>
<div id="list" hidden>
 <div class="cards" id="totals"></div>
 <h3>Rates (events per 10 s, last 10 min)</h3><div id="chart"></div>
 <p><input id="prefix" placeholder="queue name prefix"> <span id="pageinfo" class="muted"></span>
 <button id="prev">&lt;</button><button id="next">&gt;</button></p>
 <table id="queues"><thead><tr></tr></thead><tbody></tbody></table>
</div>
<div id="detail" hidden>
 <h2 id="qname"></h2>
 <div class="cards" id="qcards"></div>
 <h3>Rates (events per 10 s, last 10 min)</h3><div id="qchart"></div>
 <h3>In-flight ranges <span id="nranges" class="muted"></span></h3>
 <table id="ranges"><thead><tr><th>partition</th><th>offsets</th><th>pending</th><th>started</th>
 <th>next deadline</th><th>causes</th><th>delivery counts</th></tr></thead><tbody></tbody></table>
 <h3>Recent dead letters <span id="ndead" class="muted"></span></h3>
 <table id="dead"><thead><tr><th>offset</th><th>id</th><th>reason</th><th>deliveries</th>
 <th>dead-lettered</th><th>payload</th></tr></thead><tbody></tbody></table>
 <h3>Settings</h3><pre id="qconfig"></pre>
</div>
</main>
<script>
"use strict";
const COLS=[["queue","queue"],["tenant","tenant"],["depth","depth"],["in_flight","in flight"],
 ["scheduled","scheduled"],["dead_letters","dead letters"],["oldest_in_flight_age_s","oldest (s)"],
 ["sent_per_min","sent/min"],["received_per_min","received/min"],["acked_per_min","acked/min"],
 ["redelivered_per_min","redelivered/min"],["dead_lettered_per_min","dead-lettered/min"],["consumers","consumers"]];
const SERIES=[["sent","#6b7a99"],["acked","#1b8a3a"],["redelivered","#d98400"],["dead_lettered","#c0182b"]];
const view={sort:"queue",order:"asc",offset:0,limit:50,prefix:""};
const m=location.hash.match(/token=([^&]+)/);
if(m){sessionStorage.setItem("kmq.token",decodeURIComponent(m[1]));history.replaceState(null,"",location.pathname+location.search);}
const el=id=>document.getElementById(id);
function token(){return sessionStorage.getItem("kmq.token")||"";}
function status(state,text){const s=el("status");s.dataset.state=state;s.textContent=text;}
async function api(path){
 const h=token()?{Authorization:"Bearer "+token()}:{};
 const r=await fetch(path,{headers:h,cache:"no-store"});
 const body=await r.json().catch(()=>({error:r.statusText}));
 if(!r.ok){throw new Error((r.status===403?"access denied: ":"")+(body.error||r.status));}
 return body;}
function td(text,field){const c=document.createElement("td");c.textContent=text==null?"-":String(text);if(field)c.dataset.field=field;return c;}
function fmtAge(s){return s==null?"-":s<120?s.toFixed(1):(s/60).toFixed(1)+" min";}
function chart(box,h){
 const W=640,H=160,P=28,n=h.starts.length;let max=1;
 for(const [f] of SERIES)for(const v of h.series[f]||[])max=Math.max(max,v);
 const x=i=>P+(W-2*P)*(n<2?0:i/(n-1)),y=v=>H-P+(-(H-2*P)*v/max);
 let s=`<svg width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="rate chart">`;
 s+=`<line x1="${P}" y1="${H-P}" x2="${W-P}" y2="${H-P}" stroke="#bbb"/><text x="2" y="${P}" font-size="10">${max}</text><text x="2" y="${H-P}" font-size="10">0</text>`;
 for(const [f,c] of SERIES){const pts=(h.series[f]||[]).map((v,i)=>x(i).toFixed(1)+","+y(v).toFixed(1)).join(" ");
  s+=`<polyline fill="none" stroke="${c}" stroke-width="2" points="${pts}" data-series="${f}"/>`;}
 s+="</svg><div class='legend'>"+SERIES.map(([f,c])=>`<span><i style="background:${c}"></i>${f}</span>`).join("")+"</div>";
 box.innerHTML=s;}
function cards(box,pairs){box.replaceChildren(...pairs.map(([k,v,f])=>{const d=document.createElement("div");d.className="card";
 const b=document.createElement("b");b.textContent=v==null?"-":String(v);if(f)b.dataset.field=f;d.append(b,k);return d;}));}
async function loadList(){
 const q=new URLSearchParams({sort:view.sort,order:view.order,offset:view.offset,limit:view.limit,prefix:view.prefix});
 const d=await api("/kmq/api/queues?"+q);
 el("list").hidden=false;
 const head=el("queues").tHead.rows[0];
 head.replaceChildren(...COLS.map(([f,label])=>{const th=document.createElement("th");
  th.textContent=label+(view.sort===f?(view.order==="asc"?" \u25b2":" \u25bc"):"");
  th.onclick=()=>{view.order=view.sort===f&&view.order==="desc"?"asc":(view.sort===f?"desc":(f==="queue"?"asc":"desc"));view.sort=f;view.offset=0;refresh();};return th;}));
 const body=el("queues").tBodies[0];body.replaceChildren();
 for(const r of d.queues){const tr=document.createElement("tr");tr.dataset.queue=r.queue;
  for(const [f] of COLS){let v=r[f];if(f==="oldest_in_flight_age_s")v=fmtAge(v);
   if(f==="depth"&&v!=null&&r.depth_exact===false)v="\u2265"+v;
   const c=td(v,f);if(f==="queue"){c.textContent="";const a=document.createElement("a");a.href="/kmq/ui/queue/"+encodeURIComponent(r.queue);a.textContent=r.queue;c.append(a);}
   tr.append(c);}
  body.append(tr);}
 const t=d.totals;
 cards(el("totals"),[["queues",d.total,"total"],["depth",t.depth||0],["in flight",t.in_flight||0],["scheduled",t.scheduled||0],
  ["dead letters",t.dead_letters||0],["acked/min",t.acked_per_min||0],["redelivered/min",t.redelivered_per_min||0],["workers",d.workers]]);
 el("pageinfo").textContent=`${d.total?d.offset+1:0}-${d.offset+d.queues.length} of ${d.total}`+(d.partial?" (partial: "+d.errors.join("; ")+")":"");
 chart(el("chart"),d.history);}
async function loadQueue(name){
 const d=await api("/kmq/api/queues/"+encodeURIComponent(name));
 el("detail").hidden=false;el("qname").textContent=d.queue;el("where").textContent="/ "+d.queue;
 cards(el("qcards"),[["depth",d.depth_exact===false?"\u2265"+d.depth:d.depth,"depth"],["in flight",d.in_flight,"in_flight"],
  ["scheduled",d.scheduled,"scheduled"],["dead letters",d.dead_letters,"dead_letters"],["oldest in flight",fmtAge(d.oldest_in_flight_age_s)],...(d.consumers==null?[]:[["consumers",d.consumers,"consumers"]]),
  ["acked/min",d.acked_per_min,"acked_per_min"],["redelivered/min",d.redelivered_per_min],["dead-lettered/min",d.dead_lettered_per_min],
  ...(d.groups?[["groups waiting",d.groups.waiting,"groups_waiting"],["groups in flight",d.groups.in_flight,"groups_in_flight"],["groups held",d.groups.held,"groups_held"],["oldest group head",fmtAge(d.groups.oldest_head_age_s)]]:[])]);
 chart(el("qchart"),d.history);
 const now=Date.now();
 el("nranges").textContent=`(${d.in_flight_range_count})`;
 el("ranges").tBodies[0].replaceChildren(...d.in_flight_ranges.map(r=>{const tr=document.createElement("tr");
  tr.append(td(r.partition),td(r.start+"-"+(r.end-1)),td(r.pending,"pending"),td(fmtAge((now-r.started_ms)/1000)+" ago"),
   td(r.next_deadline_ms==null?"-":((r.next_deadline_ms-now)/1000).toFixed(1)+" s"),
   td(r.groups.map(g=>g.cause+"\u00d7"+g.count).join(", ")),
   td(r.delivery_counts?Object.entries(r.delivery_counts).map(([k,v])=>`#${k}: ${v}`).join(", "):"-"));return tr;}));
 const dl=d.dead_letters_detail;el("ndead").textContent=`(${dl.count??"\u2026"})`;
 el("dead").tBodies[0].replaceChildren(...dl.recent.map(x=>{const tr=document.createElement("tr");
  tr.append(td(x.offset),td(x.id),td(x.reason,"reason"),td(x.deliveries),td(new Date(x.dead_lettered_ms).toLocaleTimeString()),td(x.value_preview));return tr;}));
 el("qconfig").textContent=JSON.stringify({tenant:d.tenant,owner:d.owner,...d.config,since_start:d.since_start},null,1);}
async function refresh(){
 try{const p=location.pathname.match(/\/kmq\/ui\/queue\/(.+)$/);
  if(p)await loadQueue(decodeURIComponent(p[1]));else await loadList();
  status("ok","updated "+new Date().toLocaleTimeString());document.body.dataset.loaded="1";}
 catch(e){status("error",String(e.message||e));}}
el("tokenform").onsubmit=ev=>{ev.preventDefault();sessionStorage.setItem("kmq.token",el("token").value.trim());el("token").value="";refresh();};
el("prefix").oninput=ev=>{view.prefix=ev.target.value;view.offset=0;refresh();};
el("prev").onclick=()=>{view.offset=Math.max(0,view.offset-view.limit);refresh();};
el("next").onclick=()=>{view.offset+=view.limit;refresh();};
refresh();setInterval(refresh,2000);
</script></body></html>
"""


@app.page("/kmq/ui")
async def dashboard(web, request):
    """The queue table (data comes from /kmq/api/queues, with the token the page keeps)."""
    return web.html(PAGE)


@app.page("/kmq/ui/queue/{queue}")
async def dashboard_queue(web, request, queue: str):
    """One queue's page (data from /kmq/api/queues/{queue})."""
    return web.html(PAGE)
