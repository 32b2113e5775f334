-- The notifications already applied to the suppression list, by the id their sender
-- gave them (an SNS MessageId): a notification delivered again (SNS retries until it
-- gets an answer) changes nothing, so a soft bounce is never counted twice.
CREATE TABLE mf_suppression_receipts (
    receipt     TEXT NOT NULL PRIMARY KEY CHECK (length(receipt) BETWEEN 1 AND 300),
    received_at TEXT NOT NULL
);
