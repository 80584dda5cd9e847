// The page's live connection (dashboard/push.py): an EventSource on /api/events whose snapshots
// go into the pushed store. While it is down the indicator says so and the fallback interval
// polls; while it is up the interval is off. Ids and styles come from the config store.
(function () {
    let config = null;
    let source = null;
    let quarantineChanges = null;  // the last push's count of quarantine changes
    let epoch = null;  // the server's, from the event ids: another one after a restart
    let resync = false;  // after a restart: the tick moves once, for what changed meanwhile
    let leaving = false;  // the server said bye: EventSource reconnects, nothing is down

    function setProps(id, props) {
        window.dash_clientside.set_props(id, props);
    }

    function show(live) {
        setProps(config.state, {children: live ? "Live" : "Reconnecting…",
                                style: live ? config.liveStyle : config.downStyle});
        setProps(config.tick, {disabled: live});
    }

    function connect() {
        source = new EventSource(config.url);
        source.onopen = function () { show(true); };
        source.addEventListener("bye", function () { leaving = true; });
        source.addEventListener("snapshot", function (event) {
            const from = event.lastEventId.split("-")[0];
            resync = resync || (epoch !== null && from !== epoch);
            epoch = from;
            setProps(config.pushed, {data: JSON.parse(event.data)});
        });
        source.onerror = function () {
            if (leaving && source.readyState === EventSource.CONNECTING) {
                leaving = false;  // the stream's planned end: say nothing unless the reconnect fails
                return;
            }
            leaving = false;
            show(false);
            // EventSource retries a dropped connection itself, but gives up on an HTTP error.
            if (source.readyState === EventSource.CLOSED) {
                source = null;
                setTimeout(connect, config.retryMs);
            }
        };
    }

    function chosen(value) {
        return typeof value === "string" && value !== "";
    }

    // The view pushed to every page (refresh.is_default_view): the newest day, no filter.
    function isDefaultView(pushed, day, channel, symbol) {
        if (chosen(channel) || chosen(symbol)) {
            return false;
        }
        const days = (pushed && pushed.days) || [];
        return !chosen(day) || !days.includes(day) || day === days[0];
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
        // A push is the snapshot of the default view. The tick moves (the server then works out
        // this page's view) for a push in a view of the page's own, and when the quarantine
        // changed: its panel is filled on the tick.
        follow: function (pushed, day, channel, symbol, tick) {
            const noUpdate = window.dash_clientside.no_update;
            const triggered = (window.dash_clientside.callback_context.triggered || []).map(t => t.prop_id);
            const byPush = pushed && config !== null && triggered.some(id => id.startsWith(config.pushed + "."));
            const shared = pushed && isDefaultView(pushed, day, channel, symbol);
            let ticks = byPush && !shared;
            if (byPush) {
                const changes = pushed.quarantine_changes;
                ticks = ticks || resync || (quarantineChanges !== null && changes !== quarantineChanges);
                quarantineChanges = changes;
                resync = false;
            }
            return [shared ? pushed : noUpdate, ticks ? (tick || 0) + 1 : noUpdate];
        },
    };
})();
