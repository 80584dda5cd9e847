// The page's live connection (dashboard/push.py): an EventSource on /api/events whose snapshots
// go into the pushed store. While it is down the indicator says so and the fallback interval
// polls; while it is up the interval is off. Ids and styles come from the config store.
(function () {
    let config = null;
    let source = null;
    let quarantineChanges = null;  // the last push's count of quarantine changes
    let filterChanges = null;  // and of the newest day's channels and symbols
    let copied = null;  // the push_id of the snapshot last copied into the store
    let epoch = null;  // the server's, from the event ids: another one after a restart
    let resync = false;  // after a restart: the tick moves once, for what changed meanwhile
    let leaving = false;  // the server said bye: EventSource reconnects, nothing is down
    let applied = {};  // panel name -> the JSON of the outputs last set from a push
    let retryMs = null;  // the wait before the next connect after a refused one: doubles to retryMaxMs

    function setProps(id, props) {
        window.dash_clientside.set_props(id, props);
    }

    function show(live) {
        if (!live) {
            applied = {};  // the fallback tick draws through the server meanwhile
        }
        setProps(config.state, {children: live ? "Live" : "Reconnecting…",
                                style: live ? config.liveStyle : config.downStyle});
        setProps(config.tick, {disabled: live});
        setProps(config.filterTick, {disabled: live});  // while live, the push says when they changed
    }

    // Dash keeps every change of a callback's input for its undo button (hidden on this page),
    // so each push would stay in memory for as long as the page is open (plotly/dash#727); the
    // revert after a failed callback needs only the last. Nothing else reads this history.
    function forgetUndoHistory() {
        (window.dash_stores || []).forEach(function (store) {
            const past = store.getState().history.past;
            if (past.length > 1) {
                past.splice(0, past.length - 1);
            }
        });
    }

    function connect() {
        source = new EventSource(config.url);
        source.onopen = function () {
            retryMs = null;
            show(true);
        };
        source.addEventListener("bye", function () { leaving = true; });
        source.addEventListener("snapshot", function (event) {
            const from = event.lastEventId.split("-")[0];
            resync = resync || (epoch !== null && from !== epoch);
            epoch = from;
            setProps(config.pushed, {data: JSON.parse(event.data)});
            forgetUndoHistory();
        });
        source.onerror = function () {
            if (leaving && source.readyState === EventSource.CONNECTING) {
                leaving = false;  // the stream's planned end: say nothing unless the reconnect fails
                return;
            }
            leaving = false;
            show(false);
            // EventSource retries a dropped connection itself, but gives up on an HTTP error.
            // An HTTP error is a server down or full (503, --max-pages): each try waits longer.
            if (source.readyState === EventSource.CLOSED) {
                source = null;
                retryMs = Math.min(2 * (retryMs || config.retryMs / 2), config.retryMaxMs);
                setTimeout(connect, retryMs);
            }
        };
    }

    // Sets each pushed panel's outputs (dashboard/push.panels_drawn) that differ from the last set,
    // when the page's choices are the ones they were drawn with, and its tab, if it has one, is the
    // one shown: a hidden tab costs a push nothing, and gets the newest push's when opened. Returns
    // whether a panel with choices of the page's own must be drawn by the server instead (the chart alone).
    function applyPanels(panels, choices, tab) {
        let ownDrawing = false;
        (panels || []).forEach(function (panel) {
            if (panel.tab && panel.tab !== tab) {
                return;
            }
            const drawnWith = Object.keys(panel.choices).every(
                key => JSON.stringify(choices[key]) === JSON.stringify(panel.choices[key]));
            if (!drawnWith) {
                ownDrawing = true;
                return;
            }
            const props = JSON.stringify(panel.props);
            if (applied[panel.name] !== props) {
                applied[panel.name] = props;
                panel.props.forEach(function (output) {
                    setProps(output[0], {[output[1]]: output[2]});
                });
            }
        });
        return ownDrawing;
    }

    function choicesOf(values) {
        const choices = {};
        config.choices.forEach((key, index) => { choices[key] = values[index]; });
        return choices;
    }

    function chosen(value) {
        return typeof value === "string" && value !== "";
    }

    // The picker shows the newest day: empty, on it, or on a day gold does not have (pick_day).
    function isNewestDay(pushed, day) {
        const days = (pushed && pushed.days) || [];
        return !chosen(day) || !days.includes(day) || day === days[0];
    }

    // The view pushed to every page (refresh.is_default_view): the newest day, no filter.
    function isDefaultView(pushed, day, channel, symbol) {
        return !chosen(channel) && !chosen(symbol) && isNewestDay(pushed, day);
    }

    window.dash_clientside = window.dash_clientside || {};
    window.dash_clientside.push = {
        // Runs once the layout is rendered, so the stores set_props writes exist.
        connect: function (settings) {
            if (config === null && settings && typeof EventSource !== "undefined") {
                config = settings;
                connect();
            }
            return window.dash_clientside.no_update;  // the layout says Connecting… until the first open
        },
        // A push is the snapshot of the default view, its panels drawn, and the quarantine panel's
        // default view (every reason, the newest day). In the default view the panels are set here,
        // with no request (the server's callbacks take the snapshot store as State). The tick moves (the server then works out this page's
        // view) for a push in a view of the page's own, and for a quarantine change while the
        // panel shows a reason or another day.
        // tab: the tab shown (opening one sets its panels from the newest push). choiceValues: the page's choices the pushed panels were drawn with, in
        // config.choices' order.
        follow: function (pushed, day, channel, symbol, tab, tick, reason, filterTick, chartDraw, ...choiceValues) {
            const noUpdate = window.dash_clientside.no_update;
            const triggered = (window.dash_clientside.callback_context.triggered || []).map(t => t.prop_id);
            const byPush = pushed && config !== null && triggered.some(id => id.startsWith(config.pushed + "."));
            const shared = pushed && isDefaultView(pushed, day, channel, symbol);
            if (config !== null && triggered.length === 1 && triggered[0].startsWith(config.tabs + ".")) {
                if (shared && pushed.push_id === copied) {  // the newest push's panels of the tab opened
                    applyPanels(pushed.panels, choicesOf(choiceValues), tab);
                }
                return [noUpdate, noUpdate, noUpdate, noUpdate, noUpdate];
            }
            let ticks = byPush && !shared;
            let quarantine = noUpdate;
            let filters = noUpdate;
            if (byPush) {
                const options = pushed.filter_changes;
                if (filterChanges !== null && options !== filterChanges) {
                    filters = (filterTick || 0) + 1;
                }
                filterChanges = options;
                const changes = pushed.quarantine_changes;
                if (quarantineChanges !== null && changes !== quarantineChanges && !ticks) {
                    if (!chosen(reason) && isNewestDay(pushed, day) && pushed.quarantine) {
                        quarantine = pushed.quarantine;
                    } else {
                        ticks = true;
                    }
                }
                // After a restart the push brings the default view whole: a tick would have the
                // server draw it again, and a late answer could draw over a newer push.
                ticks = ticks || (resync && !shared);
                quarantineChanges = changes;
                resync = false;
                // The shown tab's own tick, if it has one, says something new came: a tab that
                // follows the push this way costs the page nothing while it is hidden.
                if (config.tabTicks[tab]) {
                    setProps(config.tabTicks[tab], {data: Date.now()});
                }
            }
            let snapshot = noUpdate;
            let chart = noUpdate;
            if (!shared) {
                copied = null;
                applied = {};  // the server draws this view
            } else if (!byPush || pushed.push_id !== copied) {  // not when only the rest moved
                copied = pushed.push_id;
                snapshot = Object.assign({}, pushed);
                // The page's other stores and ticks have these, and the panels are set now: what
                // a callback the user starts uploads stays small.
                delete snapshot.quarantine;
                delete snapshot.quarantine_changes;
                delete snapshot.filter_changes;
                delete snapshot.panels;
                if (applyPanels(pushed.panels, choicesOf(choiceValues), tab)) {
                    chart = (chartDraw || 0) + 1;
                }
            }
            return [snapshot, ticks ? (tick || 0) + 1 : noUpdate, quarantine, filters, chart];
        },
    };
})();
