-- Enrollment emails that were sent or given up no longer keep their
-- one-time link (models.ErasedBody): a backup of the database holds none.

-- +goose Up
UPDATE deliveries SET body = '{"erased":"it held a one-time link, erased when the delivery ended"}'
    WHERE event = 'staff.enroll' AND status IN ('delivered', 'failed');
-- +goose Down
SELECT 1;
