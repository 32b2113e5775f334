-- Evidence that a body went out, kept for a record's whole life. Every write of
-- TransmissionBegun counts one (the body may have left from that moment on), and the
-- count never goes down: a 4xx to the end of data or an operator's "send again" moves
-- the record back to Recorded and clears transmission_begun_at, but not this. Cancelled
-- means "nothing was transmitted on its behalf", so a record with a count above zero can
-- never be Cancelled (its way out is resolve(..., 'give_up') -> Refused).
--
-- Existing records are counted from what they still show: a transmission_begun_at, a
-- last reason from the end of data, each audited "send_again". Records already Cancelled
-- stay at 0 (a final record is never rewritten; its audit trail still tells).
--
-- The two CHECKs are unnamed here (PostgreSQL names them): SQLite 3.40 reports a failed
-- CHECK by the name of the last named constraint added with ALTER TABLE, whichever CHECK
-- failed, so named ones would make every other outbox CHECK failure read as these.
ALTER TABLE mf_outbox ADD COLUMN body_transmissions INTEGER NOT NULL DEFAULT 0
    CHECK (body_transmissions >= 0)
    CHECK (stage <> 'Cancelled' OR body_transmissions = 0);

UPDATE mf_outbox
SET body_transmissions =
        (SELECT count(*) FROM mf_outbox_events AS e
         WHERE e.email_id = mf_outbox.id AND e.action = 'send_again')
      + CASE WHEN transmission_begun_at IS NOT NULL
               OR reason LIKE '%the end of data was answered%' THEN 1 ELSE 0 END
WHERE stage <> 'Cancelled';

-- The count is evidence: no update may lower it.
CREATE TRIGGER mf_outbox_transmissions_kept BEFORE UPDATE OF body_transmissions ON mf_outbox
WHEN NEW.body_transmissions < OLD.body_transmissions
BEGIN
    SELECT RAISE(ABORT, 'body_transmissions never decreases: it is the evidence that a body went out');
END;
